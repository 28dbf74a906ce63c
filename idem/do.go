package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// claimPhaseTimeout bounds the claim phase's statements (claim, read, takeover,
// reclaim), which do not follow the request's cancellation.
const claimPhaseTimeout = 10 * time.Second

// call is one request's run through the protocol.
type call struct {
	s     *Store
	p     *Policy
	scope string
	key   string
	fp    []byte
	// token is the fencing token of our claim: a fresh random value for every claim,
	// takeover or reclaim statement we send.
	token int64
	// rowID is the ctid of our claim's row as the claim statement returned it: under
	// SERIALIZABLE the business transaction addresses the row by it (see LockOwnKeyAt).
	rowID string
	// conn is the business connection, held from the claim's flight (with a claim pool:
	// from the won claim) to the end of the call.
	conn *pgxpool.Conn
	// lock is the own-row lock when it traveled in the claim's flight: the business
	// transaction has begun. nil: it begins with its own flight.
	lock *step
}

// Do runs fn under the idempotency protocol (see the package documentation).
//
// rawKey is the key as received (nil when absent); it is validated with [ParseKey] before any
// SQL. parts are the request's fingerprint inputs ([Fingerprint]). The returned Response is
// what to send: fn's own response (OutcomeCompleted or OutcomeNotStored), a replay, or a
// problem-details rejection. err is fn's error (after rollback and release), or a database
// error of the protocol itself; the caller answers it as a server error. An error wrapping
// [ErrCommitUnknown] means the COMMIT got no answer: the claim is kept until its lease ends.
// A policy that breaks a rule of [Policy] is an error wrapping [ErrInvalidPolicy], before any
// SQL; a response body over the cap ([WithMaxResponseBytes]) is an error wrapping
// [ErrResponseTooLarge], rolled back and released like any business error. A key that
// breaks the policy's [KeySchema] is a 400, one it accepts is used in its canonical form
// ([KeySchema.Canonical]: a format uuid key in lowercase); streamed bodies among parts
// ([BufferMultipart], [BufferReader]) are read into memory first, a 413 past
// [WithMaxBodyBytes].
func (s *Store) Do(ctx context.Context, p *Policy, rawKey *string, parts []Part, fn Func) (resp *Response, err error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	ctx, endSpan := s.traceRequest(ctx, p)
	defer func() { endSpan(resp, err) }()
	fn = s.capResponse(fn)
	if rawKey == nil {
		if p.KeyRequired {
			return s.reject(p, OutcomeMissingKey, http.StatusBadRequest,
				fmt.Sprintf("this operation requires an idempotency key (%s)", p.KeySource), 0), nil
		}
		if resp := s.bufferBodies(p, parts); resp != nil {
			return resp, nil
		}
		return s.unkeyed(ctx, p, fn)
	}
	key, err := ParseKey(*rawKey)
	if err == nil {
		key, err = p.KeySchema.Canonical(key)
	}
	if errors.Is(err, ErrInvalidPattern) {
		return nil, err
	}
	if err != nil {
		return s.reject(p, OutcomeInvalidKey, http.StatusBadRequest, err.Error(), 0), nil
	}
	scope, err := s.scope(ctx)
	if err != nil {
		var pr *Problem
		if errors.As(err, &pr) {
			s.observe(p.Operation, OutcomeRejected)
			return s.problem(OutcomeRejected, *pr, 0), nil
		}
		return nil, err
	}
	if resp := s.bufferBodies(p, parts); resp != nil {
		return resp, nil
	}
	fp, err := Fingerprint(p.Operation, parts...)
	if err != nil {
		return nil, err
	}
	c := &call{s: s, p: p, scope: scope, key: key, fp: fp}
	return c.run(ctx, fn)
}

func (s *Store) reject(p *Policy, o Outcome, status int, detail string, retryAfter int) *Response {
	s.observe(p.Operation, o)
	return s.problem(o, Problem{Status: status, Detail: detail}, retryAfter)
}

func (c *call) run(ctx context.Context, fn Func) (*Response, error) {
	defer c.dropConn()
	// The claim phase runs under a context the client's going away cannot cancel: a claim
	// whose INSERT committed while its caller gave up would otherwise block retries for
	// the whole lease. The business function then sees the cancelled ctx, and the claim is
	// released.
	cctx, endSpan := c.s.trace(ctx, SpanClaim, c.p.Operation)
	qctx, cancel := context.WithTimeout(context.WithoutCancel(cctx), claimPhaseTimeout)
	defer cancel()
	how, resp, err := c.claim(cctx, qctx)
	endSpan(claimed(how, resp, err))
	if how == "" {
		return resp, err
	}
	return c.execute(ctx, how, fn)
}

// connect acquires the business connection (a no-op when the call holds it). Acquiring
// follows ctx: a request whose client is gone claims nothing.
func (c *call) connect(ctx context.Context) error {
	if c.conn != nil {
		return nil
	}
	conn, err := c.s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("idem: acquire a connection: %w", err)
	}
	c.conn = conn
	return nil
}

// dropConn gives the business connection back to the pool (which closes it if a
// transaction is still open on it).
func (c *call) dropConn() {
	if c.conn != nil {
		c.conn.Release()
		c.conn = nil
	}
}

// unkeyed runs fn in a plain transaction: the policy allows requests without a key.
func (s *Store) unkeyed(ctx context.Context, p *Policy, fn Func) (resp *Response, err error) {
	ctx, endSpan := s.trace(ctx, SpanBusiness, p.Operation)
	defer func() { endSpan(finished(resp, false, err)) }()
	s.observe(p.Operation, OutcomeUnkeyed)
	bg := context.WithoutCancel(ctx)
	for attempt := 0; ; attempt++ {
		resp, err := s.plainTx(ctx, bg, p, fn)
		if retryable(err) && attempt < s.maxRetries {
			s.observe(p.Operation, OutcomeRetried)
			continue
		}
		return resp, err
	}
}

func (s *Store) plainTx(ctx, bg context.Context, p *Policy, fn Func) (*Response, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: p.Isolation})
	if err != nil {
		return nil, fmt.Errorf("idem: begin: %w", err)
	}
	defer tx.Rollback(bg)
	bctx, cancel := withTimeout(ctx, p.Timeout)
	defer cancel()
	resp, err := fn(bctx, txOnly{tx})
	if err == nil && resp == nil {
		err = errNoResponse
	}
	if err != nil {
		return nil, err
	}
	resp.Outcome = OutcomeUnkeyed
	if !s.cacheable(resp.Status) {
		return resp, nil // rolled back by the deferred Rollback
	}
	if err := tx.Commit(bg); err != nil {
		return nil, fmt.Errorf("idem: commit: %w", err)
	}
	return resp, nil
}

// withTimeout bounds ctx by timeout when it is positive (a policy's business timeout).
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return ctx, func() {}
}
