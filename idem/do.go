package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// call is one request's run through the protocol.
type call struct {
	s      *Store
	p      *Policy
	scope  string
	key    string
	fp     []byte
	lockID int64 // LockID(scope, key)
	// snapshot: the transaction's isolation keeps one snapshot for the whole transaction
	// (REPEATABLE READ, SERIALIZABLE), taken before the lock was granted (see claimRow).
	snapshot bool
	// rowClaimed: the transaction wrote the key's row as 'processing' (ClaimKeyRow); the
	// completion updates it.
	rowClaimed bool
	// conn is the business connection, held from the claim's flight to the end of the
	// transaction.
	conn *pgxpool.Conn
	// lockRow and keyRow are the claim's scan targets (fields, not variables: those
	// would be allocated per claim).
	lockRow idemdb.LockKeyRow
	keyRow  idemdb.GetKeyRow
	// tx is what the business function gets: the transaction's query methods on conn (a
	// field, so that handing it over as a Tx allocates nothing).
	tx txOnly
	// committed is the key's row this call committed, kept for the duplicates waiting for
	// it in this process (policies with Wait only; see ownerMap).
	committed *keyRow
}

// Do runs fn under the idempotency protocol (see the package documentation).
//
// rawKey is the key as received (nil when absent); it is validated with [ParseKey] before any
// SQL. parts are the request's fingerprint inputs ([Fingerprint]). The returned Response is
// what to send: fn's own response (OutcomeCompleted or OutcomeNotStored), a replay, or a
// problem-details rejection. err is fn's error (after rollback), or a database
// error of the protocol itself; the caller answers it as a server error. An error wrapping
// [ErrCommitUnknown] means the COMMIT got no answer: a retry with the same key settles it.
// A policy that breaks a rule of [Policy] is an error wrapping [ErrInvalidPolicy], before any
// SQL; a response body over the cap ([WithMaxResponseBytes]) is an error wrapping
// [ErrResponseTooLarge], rolled back like any business error. A key that
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
	c := &call{s: s, p: p, scope: scope, key: key, fp: fp, lockID: LockID(scope, key)}
	return c.run(ctx, fn)
}

func (s *Store) reject(p *Policy, o Outcome, status int, detail string, retryAfter int) *Response {
	s.observe(p.Operation, o)
	return s.problem(o, Problem{Status: status, Detail: detail}, retryAfter)
}

// run claims the key and runs the business, in one transaction per attempt: again after
// a serialization failure or deadlock (at most the store's retries), and, for a duplicate
// under a policy with Wait, again once the key's owner is done.
func (c *call) run(ctx context.Context, fn Func) (*Response, error) {
	defer c.dropConn() // also when the business function panics
	var waitUntil time.Time
	if c.p.Wait > 0 {
		waitUntil = time.Now().Add(c.p.Wait)
	}
	for attempt := 0; ; {
		resp, err := c.once(ctx, fn)
		c.dropConn()
		retry, retrying := asRetry(err)
		switch {
		case retrying:
			if attempt >= c.s.maxRetries {
				c.s.observe(c.p.Operation, OutcomeFailed)
				return nil, retry.err
			}
			attempt++
			c.s.observe(c.p.Operation, OutcomeRetried)
			continue
		case err != nil || resp != nil:
			return resp, err
		}
		// The key is held by another transaction.
		if waitUntil.IsZero() {
			return c.inProgress(liveOwnerRetryAfter), nil
		}
		ended, row := c.await(ctx, waitUntil)
		switch {
		case !ended:
			return c.inProgress(liveOwnerRetryAfter), nil
		case row != nil:
			// The owner, in this process, committed this key's row: it answers as the
			// row read by a claim would, without a connection.
			return c.answer(*row), nil
		}
	}
}

// liveOwnerRetryAfter is the Retry-After, in seconds, of a 409 whose key a running
// transaction holds: when a retry is likely to find the owner's answer, not the longest the
// owner could hold the key (its idle bound or timeout, often 30s: a client that honours
// Retry-After, as idemclient does, would wait that long for a request that takes a
// fraction of a second, or give up within its deadline). A retry costs one claim flight;
// an operation whose duplicates should rather wait for the owner sets the marker's wait.
const liveOwnerRetryAfter = 1

// once is one attempt: the claim's flight, then, when the key is ours, the business and
// the completion. A nil response and nil error: another transaction holds the key.
func (c *call) once(ctx context.Context, fn Func) (*Response, error) {
	c.committed = nil
	cctx, endSpan := c.s.trace(ctx, SpanClaim, c.p.Operation)
	state, resp, err := c.claim(cctx)
	endSpan(claimSpan(state, resp, err))
	switch {
	case err != nil:
		if retryable(err) {
			return nil, errRetry{err}
		}
		return nil, err
	case state == claimAnswered:
		return resp, nil
	case state == claimBusy:
		return nil, nil
	}
	done := c.s.holding(c)
	defer done()
	return c.execute(ctx, state, fn)
}

// connect acquires the business connection (a no-op when the call holds it), within the
// store's acquire timeout ([WithAcquireTimeout]) and ctx.
func (c *call) connect(ctx context.Context) error {
	if c.conn != nil {
		return nil
	}
	conn, err := c.s.acquire(ctx)
	if err != nil {
		return err
	}
	c.conn = conn
	return nil
}

// acquire takes a connection from the pool within the store's acquire timeout and ctx. A
// wait that the acquire timeout ended (ctx still live) wraps [ErrPoolExhausted].
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(actx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w (waited %s): %w", ErrPoolExhausted, s.acquireTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("idem: acquire a connection: %w", err)
	}
	return conn, nil
}

// dropConn gives the business connection back to the pool ([giveBack]).
func (c *call) dropConn() {
	if c.conn != nil {
		giveBack(c.conn)
		c.conn = nil
	}
}

// giveBack returns conn to the pool (which closes it if a transaction is still open on
// it). A connection pgx has given up (closed after a flight past its deadline, or a
// transport error) leaves the pool at once, and its socket is closed soon after: its pool slot
// is free at the deadline. Released to the pool instead, it would hold its slot while
// pgx's close path runs (pgconn's asyncClose sends a cancel request, then reads the
// socket until the server closes it, for up to 15 s) and the pool's destructor waits for
// that: a frozen database (or PgBouncer) whose network still acknowledges would keep
// every given-up slot 15 s past its deadline, and the requests behind them would find the
// pool exhausted. Its socket is closed after a cancel request of idem's (closeGivenUp,
// bounded by 15 s, in the background: behind PgBouncer the cancel needs the client
// connection open); pgx's close goroutine still runs, holding no slot; the pool's
// BeforeClose hook is not called for such a connection.
func giveBack(conn *pgxpool.Conn) {
	if !conn.Conn().IsClosed() {
		conn.Release()
		return
	}
	// Out of the pool now (its slot is free); the cancel request, then the socket's close,
	// in the background (closeGivenUp).
	go closeGivenUp(conn.Hijack().PgConn(), 15*time.Second)
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

// plainTx is one attempt of an unkeyed request, bounded as a keyed one is: the pool
// acquire by the acquire timeout (an exhausted pool wraps [ErrPoolExhausted]), BEGIN and
// COMMIT each by the flight timeout (the socket's deadline, as the protocol's flights),
// the business by the policy's timeout; a connection given up is closed at once
// ([giveBack]).
func (s *Store) plainTx(ctx, bg context.Context, p *Policy, fn Func) (*Response, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer giveBack(conn)
	pc := conn.Conn()
	fctx, d := s.boundFlights(ctx, pc)
	tx, err := pc.BeginTx(fctx, pgx.TxOptions{IsoLevel: p.Isolation})
	err = d.err(err)
	d.end()
	if err != nil {
		return nil, fmt.Errorf("idem: begin: %w", err)
	}
	defer func() {
		rctx, d := s.boundFlights(bg, pc)
		_ = tx.Rollback(rctx) // a no-op after the commit
		d.end()
	}()
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
	cctx, d := s.boundFlights(bg, pc)
	err = d.err(tx.Commit(cctx))
	d.end()
	if err != nil {
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
