package idemclient

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// backoff is the full-jitter wait after attempt n (1-based): uniform in
// [0, min(MaxDelay, BaseDelay·2ⁿ⁻¹)).
func (c *Client) backoff(n int) time.Duration {
	return time.Duration(c.random() * float64(c.backoffCap(n)))
}

// backoffCap is min(MaxDelay, BaseDelay·2ⁿ⁻¹), without overflowing.
func (c *Client) backoffCap(n int) time.Duration {
	base, ceil := c.BaseDelay, c.MaxDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if ceil <= 0 {
		ceil = DefaultMaxDelay
	}
	d := base
	for i := 1; i < n && d < ceil; i++ {
		d *= 2
	}
	return min(d, ceil)
}

func (c *Client) random() float64 {
	if c.rand != nil {
		return c.rand()
	}
	return rand.Float64()
}

// retryAfter parses a Retry-After value (RFC 9110 §10.2.3: delay-seconds or an
// HTTP-date, which counts from now); ok is false when v is empty or neither.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
