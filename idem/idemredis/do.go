package idemredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// Func is the business function of an operation on the Redis store: no transaction (the
// business is not atomic with the key). It must finish its own work, commit included
// where it writes to a database, before it returns: the key is completed after it.
type Func func(ctx context.Context) (*idem.Response, error)

var errNoResponse = errors.New("idemredis: business function returned no response and no error")

// call is one keyed request's run through the protocol.
type call struct {
	s     *Store
	p     *idem.Policy
	scope string
	key   string
	rkey  string // the Redis key
	fp    []byte
	token string // our claim's fencing token: 16 random bytes, hex
}

// Do runs fn under the idempotency protocol with the key in Redis (see the package
// documentation): the Redis counterpart of [idem.Store.Do], with the same arguments
// except that fn gets no transaction.
//
// rawKey is the key as received (nil when absent), validated with [idem.ParseKey] and
// the policy's KeySchema before any Redis call; parts are the fingerprint inputs
// ([idem.Fingerprint]). The returned Response is what to send: fn's response (outcome
// completed, not_stored, or [OutcomeCompletionLost]), a replay (byte-identical, with
// Idempotent-Replayed: true), or a rejection: 400, 409 with Retry-After (the holder's
// remaining lease, from the Redis server's clock), 413, 422, or 503 with Retry-After while
// Redis cannot be reached, in which case fn does not run. err is fn's error (the claim
// released), or an error of the protocol itself (a policy breaking a rule of
// [idem.Policy], a record under the store's prefix that it did not write); the caller
// answers it as a server error. The policy's Isolation is not used.
func (s *Store) Do(ctx context.Context, p *idem.Policy, rawKey *string, parts []idem.Part, fn Func) (resp *idem.Response, err error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil *Policy", idem.ErrInvalidPolicy)
	}
	if _, err := idem.NewPolicy(*p); err != nil {
		return nil, err
	}
	ctx, endSpan := s.traceRequest(ctx, p)
	defer func() { endSpan(resp, err) }()
	if rawKey == nil {
		if p.KeyRequired {
			return s.reject(p, idem.OutcomeMissingKey, http.StatusBadRequest,
				fmt.Sprintf("this operation requires an idempotency key (%s)", p.KeySource), 0), nil
		}
		if err := idem.BufferBodies(parts, s.maxBody); err != nil {
			return s.rejection(p, err), nil
		}
		return s.unkeyed(ctx, p, fn)
	}
	key, err := idem.ParseKey(*rawKey)
	if err == nil {
		key, err = p.KeySchema.Canonical(key)
	}
	if errors.Is(err, idem.ErrInvalidPattern) {
		return nil, err
	}
	if err != nil {
		return s.reject(p, idem.OutcomeInvalidKey, http.StatusBadRequest, err.Error(), 0), nil
	}
	scope, err := s.scope(ctx)
	if err != nil {
		var pr *idem.Problem
		if errors.As(err, &pr) {
			s.observe(p.Operation, idem.OutcomeRejected)
			return s.problem(idem.OutcomeRejected, *pr, 0), nil
		}
		return nil, err
	}
	if err := idem.BufferBodies(parts, s.maxBody); err != nil {
		return s.rejection(p, err), nil
	}
	fp, err := idem.Fingerprint(p.Operation, parts...)
	if err != nil {
		return nil, err
	}
	c := &call{s: s, p: p, scope: scope, key: key, rkey: redisKey(s.prefix, scope, key), fp: fp, token: newToken()}
	return c.run(ctx, fn)
}

// newToken is a fencing token: 128 random bits, so no two claims share one.
func newToken() string {
	var b [tokenLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func (c *call) run(ctx context.Context, fn Func) (*idem.Response, error) {
	cctx, endSpan := c.s.trace(ctx, idem.SpanClaim, c.p.Operation)
	won, resp, spanErr, err := c.claim(cctx)
	switch {
	case won:
		endSpan(idem.SpanResult{Outcome: idem.OutcomeClaimed})
	case spanErr != nil:
		endSpan(idem.SpanResult{Outcome: resp.Outcome, Err: spanErr})
	default:
		endSpan(phase(resp, err))
	}
	if !won {
		return resp, err
	}
	return c.execute(ctx, fn)
}

// wait is how long a duplicate waits for the holder's answer: the operation's own
// (Policy.Wait, from its x-idempotent marker), else the store's ([WithWait]).
func wait(s *Store, p *idem.Policy) time.Duration {
	if p.Wait > 0 {
		return p.Wait
	}
	return s.wait
}

// claim claims the key (SET NX PX in claimScript), or decides the answer from the
// record that holds it: 422, replay, or 409 (after waiting for the holder, with
// Policy.Wait or [WithWait]). A Redis failure is a 503, with the failure as spanErr.
func (c *call) claim(ctx context.Context) (won bool, resp *idem.Response, spanErr, err error) {
	s, p := c.s, c.p
	claimRecord := encodeClaim(c.token, c.fp, p.Operation)
	lease := lease(p)
	var waitUntil time.Time
	if w := wait(s, p); w > 0 {
		waitUntil = time.Now().Add(w)
	}
	for {
		// The claim does not follow the client's going away: a claim that landed while
		// its caller gave up would block retries for the whole lease. The business then
		// sees the cancelled ctx and the claim is released.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.callTimeout)
		res, rerr := claimScript.Run(qctx, s.rdb, []string{c.rkey}, claimRecord, lease.Milliseconds()).Result()
		cancel()
		if rerr != nil {
			return false, s.unavailable(p), fmt.Errorf("%w: claim: %w", ErrUnavailable, rerr), nil
		}
		if n, ok := res.(int64); ok && n == 1 {
			s.observe(p.Operation, idem.OutcomeClaimed)
			return true, nil, nil, nil
		}
		held, pttl, err := heldBy(res)
		if err != nil {
			return false, nil, nil, err
		}
		switch {
		case held.operation != p.Operation:
			return false, s.reject(p, idem.OutcomeMismatch, http.StatusUnprocessableEntity,
				fmt.Sprintf("this idempotency key was used for another operation (%s)", held.operation), 0), nil, nil
		case string(held.fingerprint) != string(c.fp):
			return false, s.reject(p, idem.OutcomeMismatch, http.StatusUnprocessableEntity,
				"this idempotency key was used with a different request payload", 0), nil, nil
		case held.state == stateCompleted:
			s.observe(p.Operation, idem.OutcomeReplayed)
			return false, &idem.Response{Status: held.status, Header: held.header, Body: held.body, Outcome: idem.OutcomeReplayed}, nil, nil
		}
		if !waitUntil.IsZero() && time.Now().Before(waitUntil) {
			if s.hookPolled != nil {
				s.hookPolled()
			}
			t := time.NewTimer(min(s.pollInterval, time.Until(waitUntil)))
			select {
			case <-t.C:
				continue
			case <-ctx.Done(): // the client is gone: stop waiting
				t.Stop()
			}
		}
		return false, c.inProgress(pttl), nil, nil
	}
}

// heldBy decodes claimScript's answer for a key held by another record.
func heldBy(res any) (record, time.Duration, error) {
	a, ok := res.([]any)
	if !ok || len(a) != 2 {
		return record{}, 0, fmt.Errorf("idemredis: claim: unexpected answer %v", res)
	}
	v, _ := a[0].(string)
	pttl, _ := a[1].(int64)
	r, err := decode(v)
	if err != nil {
		return record{}, 0, err
	}
	return r, time.Duration(pttl) * time.Millisecond, nil
}

// inProgress answers 409 with Retry-After: the holder's remaining lease (PTTL, the Redis
// server's clock) in whole seconds, clamped to 1..lease and, when the policy has a
// timeout, to at most the timeout.
func (c *call) inProgress(remaining time.Duration) *idem.Response {
	maxS := int(math.Ceil(lease(c.p).Seconds()))
	if c.p.Timeout > 0 {
		maxS = min(maxS, int(math.Ceil(c.p.Timeout.Seconds())))
	}
	seconds := max(1, min(int(math.Ceil(remaining.Seconds())), maxS))
	return c.s.reject(c.p, idem.OutcomeInProgress, http.StatusConflict,
		"a request with this idempotency key is being processed; retry later", seconds)
}

func (s *Store) unavailable(p *idem.Policy) *idem.Response {
	return s.reject(p, OutcomeUnavailable, http.StatusServiceUnavailable,
		"the idempotency key store is unavailable; the request was not processed, retry later", s.unavailableRA)
}

// execute runs the business function of the claim we hold, then completes the key.
func (c *call) execute(ctx context.Context, fn Func) (resp *idem.Response, err error) {
	s, p := c.s, c.p
	ctx, endSpan := s.trace(ctx, idem.SpanBusiness, p.Operation)
	defer func() { endSpan(phase(resp, err)) }()
	bg := context.WithoutCancel(ctx)
	// A panicking business function is a business error: release, then let the panic
	// go on. runtime.Goexit is not recovered: an owner that is gone does not release.
	defer func() {
		if v := recover(); v != nil {
			s.observe(p.Operation, idem.OutcomeFailed)
			c.release(bg)
			panic(v)
		}
	}()
	bctx, cancel := withTimeout(idem.ContextWithKey(ctx, idem.KeyInfo{Scope: c.scope, Key: c.key}), p.Timeout)
	defer cancel()
	resp, err = fn(bctx)
	err = checkResponse(resp, err)
	if err != nil {
		s.observe(p.Operation, idem.OutcomeFailed)
		c.release(bg)
		return nil, err
	}
	if s.hookBusinessDone != nil {
		s.hookBusinessDone()
	}
	if !s.cacheable(resp.Status) {
		c.release(bg)
		resp.Outcome = idem.OutcomeNotStored
		s.observe(p.Operation, idem.OutcomeNotStored)
		return resp, nil
	}
	// The business ran: complete under a context the client's going away cannot cancel.
	cctx, endComplete := s.trace(bg, idem.SpanComplete, p.Operation)
	resp, cerr := c.complete(cctx, resp)
	endComplete(idem.SpanResult{Outcome: resp.Outcome, Err: cerr})
	return resp, nil
}

// checkResponse is fn's error, or one for a missing response or a body over the cap.
func checkResponse(resp *idem.Response, err error) error {
	switch {
	case err != nil:
		return err
	case resp == nil:
		return errNoResponse
	case int64(len(resp.Body)) > idem.DefaultMaxResponseBytes:
		return fmt.Errorf("%w: %d bytes, the cap is %d", idem.ErrResponseTooLarge, len(resp.Body), idem.DefaultMaxResponseBytes)
	}
	return nil
}

// complete records resp with the retention as its TTL, fenced by our token. A refused
// or failed completion leaves resp the answer (the business ran) with the outcome
// OutcomeCompletionLost, logged and observed; the returned error says why, for the span.
func (c *call) complete(ctx context.Context, resp *idem.Response) (*idem.Response, error) {
	s, p := c.s, c.p
	rec, err := encodeCompleted(c.token, c.fp, p.Operation, resp)
	var n int
	if err == nil {
		qctx, cancel := context.WithTimeout(ctx, s.callTimeout)
		n, err = completeScript.Run(qctx, s.rdb, []string{c.rkey}, c.token, rec, retention(p).Milliseconds()).Int()
		cancel()
	}
	switch {
	case err != nil:
		err = fmt.Errorf("idemredis: complete: %w", err)
		s.logger.WarnContext(ctx, "idemredis: the business ran but its completion was lost; a retry with the key runs it again",
			"operation", p.Operation, "err", err)
	case n == completeFenced:
		err = ErrFenced
		s.observe(p.Operation, OutcomeFenced)
		s.logger.WarnContext(ctx, "idemredis: the business outlived its lease and a newer request holds the key: completion refused; the business may run twice",
			"operation", p.Operation, "lease", lease(p))
	case n == completeExpired:
		s.observe(p.Operation, OutcomeLateCompletion)
		fallthrough
	default:
		resp.Outcome = idem.OutcomeCompleted
		s.observe(p.Operation, idem.OutcomeCompleted)
		return resp, nil
	}
	resp.Outcome = OutcomeCompletionLost
	s.observe(p.Operation, OutcomeCompletionLost)
	return resp, err
}

// release deletes our claim so that a retry runs at once. Failure is tolerated: the
// lease bounds how long the claim blocks retries.
func (c *call) release(bg context.Context) {
	ctx, cancel := context.WithTimeout(bg, c.s.callTimeout)
	defer cancel()
	n, err := releaseScript.Run(ctx, c.s.rdb, []string{c.rkey}, c.token).Int()
	if err == nil && n == 1 {
		c.s.observe(c.p.Operation, idem.OutcomeReleased)
	}
}

// unkeyed runs fn with no idempotency: the policy allows requests without a key.
func (s *Store) unkeyed(ctx context.Context, p *idem.Policy, fn Func) (resp *idem.Response, err error) {
	ctx, endSpan := s.trace(ctx, idem.SpanBusiness, p.Operation)
	defer func() { endSpan(phase(resp, err)) }()
	s.observe(p.Operation, idem.OutcomeUnkeyed)
	bctx, cancel := withTimeout(ctx, p.Timeout)
	defer cancel()
	resp, err = fn(bctx)
	if err = checkResponse(resp, err); err != nil {
		return nil, err
	}
	resp.Outcome = idem.OutcomeUnkeyed
	return resp, nil
}

func lease(p *idem.Policy) time.Duration {
	if p.Lease > 0 {
		return p.Lease
	}
	return idem.DefaultLease
}

func retention(p *idem.Policy) time.Duration {
	if p.Retention > 0 {
		return p.Retention
	}
	return idem.DefaultRetention
}

func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return ctx, func() {}
}
