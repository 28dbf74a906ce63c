package idemclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ReplayedHeader marks an answer the server replayed from the key's stored response.
const ReplayedHeader = "Idempotent-Replayed"

// Defaults of the zero fields of [Client].
const (
	DefaultMaxAttempts      = 5
	DefaultBaseDelay        = 100 * time.Millisecond
	DefaultMaxDelay         = 5 * time.Second
	DefaultMaxRetryAfter    = time.Minute
	DefaultAttemptTimeout   = 30 * time.Second
	DefaultMaxResponseBytes = 32 << 20
	DefaultMaxBodyBytes     = 32 << 20
)

// Doer sends one HTTP request: *http.Client, and oapi-codegen's HttpRequestDoer.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client runs logical calls: one key, retried attempts. The zero value is ready to use
// (http.DefaultClient, the defaults above). A Client is safe for concurrent use; do not
// change its fields while calls run.
type Client struct {
	// Doer sends the attempts. Nil: http.DefaultClient.
	Doer Doer
	// MaxAttempts bounds the attempts of a call, the first included. Default 5.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the backoff: before attempt n+1 a uniform random wait
	// in [0, min(MaxDelay, BaseDelay·2ⁿ⁻¹)) (full jitter). Defaults 100ms and 5s.
	BaseDelay, MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After a call waits for; an answer asking for
	// longer is returned as it is. Default 1m.
	MaxRetryAfter time.Duration
	// AttemptTimeout bounds one attempt, from sending to the end of the response body:
	// an attempt past it (a response lost on the way) is retried. Default 30s; the
	// caller's context deadline bounds the whole call.
	AttemptTimeout time.Duration
	// MaxResponseBytes bounds a response body, read whole by Do (so that a connection cut
	// in the middle of a body is retried, not handed to the caller). Default 32 MiB.
	MaxResponseBytes int64
	// MaxBodyBytes bounds a request body Do has to buffer (one without GetBody: a
	// multipart or raw io.Reader), so that every attempt re-sends the same bytes.
	// Default 32 MiB.
	MaxBodyBytes int64
	// NewKey mints the key of a call that brings none. Default: [NewKey] (UUID v4), or
	// random hex characters when the spec's maxLength is shorter than a UUID.
	NewKey func() (string, error)
	// OnAttempt, when set, is told of every attempt's outcome (a status or an error)
	// before Do decides whether to retry: for logs and metrics.
	OnAttempt func(Attempt)

	sleep func(ctx context.Context, d time.Duration) error // tests: record the waits
	rand  func() float64                                   // tests: in [0, 1)
}

// Attempt is one attempt of a call, as [Client.OnAttempt] sees it.
type Attempt struct {
	Key      string
	N        int // 1 for the first attempt
	Status   int // 0 when Err is set
	Replayed bool
	Err      error
	Elapsed  time.Duration
}

// Option changes one call.
type Option func(*call)

type call struct {
	key         string
	maxAttempts int
	edit        []func(context.Context, *http.Request) error
}

// WithKey makes the call use key (unless the request carries one already).
func WithKey(key string) Option { return func(c *call) { c.key = key } }

// WithMaxAttempts bounds this call's attempts (at least 1).
func WithMaxAttempts(n int) Option { return func(c *call) { c.maxAttempts = max(n, 1) } }

// WithRequestEditor runs fn on every attempt's request before it is sent (auth headers,
// tracing: oapi-codegen's RequestEditorFn has this shape).
func WithRequestEditor(fn func(ctx context.Context, req *http.Request) error) Option {
	return func(c *call) { c.edit = append(c.edit, fn) }
}

// Result says what a call did.
type Result struct {
	Key      string // the idempotency key every attempt carried
	Attempts int    // attempts sent, the first included
	Status   int    // the final answer's status; 0 when there was none
	// Replayed: the final answer carried Idempotent-Replayed: true, the server's stored
	// answer of an earlier attempt (or of another caller's request with this key).
	Replayed bool
	// Retryable: the final answer is one a later retry might change (a 408, 409, 429 or a
	// 5xx not stored): the attempts, the deadline or MaxRetryAfter ran out first.
	Retryable bool
	Waited    time.Duration // total time spent between attempts
}

// CallError is Do's error when no final answer came: the last attempt's error, with
// what the call did.
type CallError struct {
	Result Result
	Err    error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("idemclient: no answer after %d attempt(s) with idempotency key %q: %v", e.Result.Attempts, e.Result.Key, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// Do sends req as one logical call with the idempotency key at key's place, retrying
// as the package doc says. req's body (through GetBody, or read once, bounded by
// MaxBodyBytes) is re-sent byte-identical on every attempt; req's own context is
// replaced by ctx.
//
// It returns the final response, its body read whole and replaced by an in-memory
// reader (close it or not: nothing is left open), and the Result. A response that is
// not a success is no error: check its status (Result.Retryable says whether a retry
// might have changed it). The error is non-nil when no response came: a *CallError for
// transport errors, the context's error wrapped in one when ctx ended, or an error
// before any attempt (an invalid key, an unreadable body).
func (c *Client) Do(ctx context.Context, req *http.Request, key Key, opts ...Option) (*http.Response, *Result, error) {
	cl := call{maxAttempts: c.maxAttempts()}
	for _, o := range opts {
		o(&cl)
	}
	if err := key.validPlace(); err != nil {
		return nil, nil, err
	}
	key = key.forBody(req.Header.Get("Content-Type"))
	body, err := c.bodyBytes(req)
	if err != nil {
		return nil, nil, err
	}
	res := &Result{}
	if res.Key, body, err = c.resolveKey(ctx, req, key, body, cl.key); err != nil {
		return nil, res, err
	}
	doer := c.Doer
	if doer == nil {
		doer = http.DefaultClient
	}
	for n := 1; ; n++ {
		resp, err := c.attempt(ctx, doer, req, key, res.Key, body, cl.edit, n)
		res.Attempts = n
		var ee *editError
		if errors.As(err, &ee) {
			return nil, res, ee.err
		}
		if err != nil && ctx.Err() != nil { // the caller gave up
			return nil, res, &CallError{Result: *res, Err: ctx.Err()}
		}
		var wait time.Duration
		if err == nil {
			res.Status, res.Replayed = resp.StatusCode, replayed(resp)
			var retry bool
			retry, wait = c.classify(resp)
			res.Retryable = retry
			if !retry {
				return resp, res, nil
			}
		}
		if n >= cl.maxAttempts {
			return finish(resp, res, err)
		}
		wait += c.backoff(n)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return finish(resp, res, err) // the wait would outlast the caller
		}
		if err := c.wait(ctx, wait); err != nil {
			return nil, res, &CallError{Result: *res, Err: err}
		}
		res.Waited += wait
	}
}

// finish ends a call whose last answer is not final: with that answer when there is
// one, else with the last attempt's error.
func finish(resp *http.Response, res *Result, err error) (*http.Response, *Result, error) {
	if err != nil {
		res.Status, res.Replayed, res.Retryable = 0, false, true
		return nil, res, &CallError{Result: *res, Err: err}
	}
	return resp, res, nil
}

// attempt sends attempt n and reads its answer whole; a read error is the attempt's
// error (the connection was cut: retried like any transport error).
func (c *Client) attempt(ctx context.Context, doer Doer, tmpl *http.Request, key Key, k string, body []byte, edit []func(context.Context, *http.Request) error, n int) (*http.Response, error) {
	actx, cancel := context.WithTimeout(ctx, c.attemptTimeout())
	defer cancel()
	req := tmpl.Clone(actx)
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	} else {
		req.Body, req.GetBody, req.ContentLength = nil, nil, 0
	}
	if key.Header != "" {
		req.Header.Set(key.Header, k)
	}
	start := time.Now()
	report := func(status int, replayed bool, err error) {
		if c.OnAttempt != nil {
			c.OnAttempt(Attempt{Key: k, N: n, Status: status, Replayed: replayed, Err: err, Elapsed: time.Since(start)})
		}
	}
	for _, fn := range edit {
		if err := fn(actx, req); err != nil {
			return nil, &editError{err} // the next attempt would fail the same: not retried
		}
	}
	resp, err := doer.Do(req)
	if err != nil {
		report(0, false, err)
		return nil, err
	}
	limit := c.maxResponseBytes()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	resp.Body.Close()
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("idemclient: the %d response body is longer than MaxResponseBytes (%d bytes)", resp.StatusCode, limit)
	}
	if err != nil {
		err = fmt.Errorf("reading the %d response: %w", resp.StatusCode, err)
		report(0, false, err)
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	report(resp.StatusCode, replayed(resp), nil)
	return resp, nil
}

// classify says whether resp may change on a retry, and the wait its Retry-After asks.
func (c *Client) classify(resp *http.Response) (retry bool, wait time.Duration) {
	if replayed(resp) {
		return false, 0 // stored: a retry gets the same answer
	}
	s := resp.StatusCode
	if s != http.StatusConflict && s != http.StatusTooManyRequests && s != http.StatusRequestTimeout && s < 500 {
		return false, 0
	}
	if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		if ra > c.maxRetryAfter() {
			return false, 0 // longer than the caller is willing to wait: the answer stands
		}
		return true, ra
	}
	return true, 0
}

func replayed(resp *http.Response) bool {
	return strings.EqualFold(strings.TrimSpace(resp.Header.Get(ReplayedHeader)), "true")
}

const nilUUID = "00000000-0000-0000-0000-000000000000"

// resolveKey picks the call's key (the request's own, the option's, the context's, a
// minted one), checks it, and puts it in the body when the body carries it.
func (c *Client) resolveKey(ctx context.Context, req *http.Request, key Key, body []byte, opt string) (string, []byte, error) {
	var own string
	if key.Header != "" {
		own = req.Header.Get(key.Header)
	} else {
		var err error
		if own, err = bodyKey(key, body); err != nil {
			return "", nil, err
		}
	}
	if key.Format == "uuid" && own == nilUUID {
		own = "" // what an unset uuid field (openapi_types.UUID) encodes to: no key
	}
	k := own
	switch {
	case k != "":
	case opt != "":
		k = opt
	default:
		if ck, ok := KeyFromContext(ctx); ok {
			k = ck
			break
		}
		mint := c.NewKey
		if mint == nil {
			mint = func() (string, error) { return mintFor(key) }
		}
		var err error
		if k, err = mint(); err != nil {
			return "", nil, fmt.Errorf("idemclient: minting an idempotency key: %w", err)
		}
	}
	if err := key.Check(k); err != nil {
		return "", nil, fmt.Errorf("%w (key from %s)", err, key.where())
	}
	if key.Header != "" && own == "" {
		req.Header.Del(key.Header) // attempt sets it
	}
	if own == "" && key.Header == "" {
		var err error
		if body, err = withBodyKey(key, body, k); err != nil {
			return "", nil, err
		}
	}
	return k, body, nil
}

// bodyBytes returns req's body, read once: through GetBody when it has one, else from
// Body (bounded by MaxBodyBytes). Nil when req has no body.
func (c *Client) bodyBytes(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	rc := req.Body
	if req.GetBody != nil {
		var err error
		if rc, err = req.GetBody(); err != nil {
			return nil, fmt.Errorf("idemclient: the request body: %w", err)
		}
	}
	defer rc.Close()
	limit := c.maxBodyBytes()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("idemclient: reading the request body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("idemclient: the request body is longer than MaxBodyBytes (%d bytes)", limit)
	}
	if req.GetBody != nil {
		req.Body.Close()
	}
	return b, nil
}

func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) maxAttempts() int {
	if c.MaxAttempts > 0 {
		return c.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (c *Client) attemptTimeout() time.Duration {
	if c.AttemptTimeout > 0 {
		return c.AttemptTimeout
	}
	return DefaultAttemptTimeout
}

func (c *Client) maxRetryAfter() time.Duration {
	if c.MaxRetryAfter > 0 {
		return c.MaxRetryAfter
	}
	return DefaultMaxRetryAfter
}

func (c *Client) maxResponseBytes() int64 {
	if c.MaxResponseBytes > 0 {
		return c.MaxResponseBytes
	}
	return DefaultMaxResponseBytes
}

func (c *Client) maxBodyBytes() int64 {
	if c.MaxBodyBytes > 0 {
		return c.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

// editError is a request editor's error: the call fails with it, unretried.
type editError struct{ err error }

func (e *editError) Error() string { return e.err.Error() }
