package idemclient

import (
	"context"
	"time"
)

// SetSleep replaces c's waits by fn (which records them), for tests.
func SetSleep(c *Client, fn func(ctx context.Context, d time.Duration) error) { c.sleep = fn }

// SetRand replaces c's jitter source by fn, returning values in [0, 1).
func SetRand(c *Client, fn func() float64) { c.rand = fn }

// BackoffCap is c's backoff ceiling after attempt n.
func BackoffCap(c *Client, n int) time.Duration { return c.backoffCap(n) }

var RetryAfter = retryAfter
