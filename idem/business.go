package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// ErrCommitUnknown is wrapped by the error of a call whose COMMIT got no answer (the
// connection was lost): the business writes may or may not have committed. The claim is
// not released; once its lease ends a retry reclaims it, or replays if the commit landed.
var ErrCommitUnknown = errors.New("idem: commit outcome unknown")

// errNoResponse is the error of a business function that returned neither a response nor
// an error.
var errNoResponse = errors.New("idem: business function returned no response and no error")

// execute runs the business transaction of the claim we hold (c.token), retrying it after
// serialization failures and deadlocks.
func (c *call) execute(ctx context.Context, how Outcome, fn Func) (resp *Response, err error) {
	ctx, endSpan := c.s.trace(ctx, SpanBusiness, c.p.Operation)
	defer func() { endSpan(finished(resp, false, err)) }()
	s, p := c.s, c.p
	s.observe(p.Operation, how)
	if s.hookClaimed != nil {
		s.hookClaimed()
	}
	for attempt := 0; ; attempt++ {
		resp, retry, err := c.attempt(ctx, fn)
		if retry {
			if attempt < s.maxRetries {
				s.observe(p.Operation, OutcomeRetried)
				continue
			}
			// Out of retries: a business failure like any other.
			s.observe(p.Operation, OutcomeFailed)
			c.release(context.WithoutCancel(ctx))
		}
		return resp, err
	}
}

// attempt is one business transaction: (BEGIN and own-row lock, unless they came with the
// claim) → fn → one flight of the fenced completion and COMMIT. retry reports a
// serialization failure or deadlock, rolled back, with the claim not released (execute
// releases it when no retry follows; a retry's lock finds out whether the claim is still
// ours).
func (c *call) attempt(ctx context.Context, fn Func) (resp *Response, retry bool, err error) {
	s, p := c.s, c.p
	bg := context.WithoutCancel(ctx)
	lock, err := c.begin(ctx)
	if err != nil {
		c.release(bg)
		return nil, false, fmt.Errorf("idem: begin: %w", err)
	}
	if lock.err != nil {
		// Under REPEATABLE READ or SERIALIZABLE a reclaim that committed since our
		// snapshot fails the lock with 40001: retried, the lock sees the new token.
		return c.fail(bg, fmt.Errorf("idem: lock own key: %w", lock.err))
	}
	if !lock.found {
		c.rollback(bg)
		return c.leaseLost(), false, nil
	}
	// A panicking business function is a business error (net/http recovers the panic and
	// the process lives on): roll back and release, then let the panic continue.
	// runtime.Goexit is not recovered: an owner that is gone does not release.
	defer func() {
		if v := recover(); v != nil {
			c.rollback(bg)
			s.observe(p.Operation, OutcomeFailed)
			c.release(bg)
			panic(v)
		}
	}()
	bctx, cancel := withTimeout(context.WithValue(ctx, ctxKey{}, KeyInfo{Scope: c.scope, Key: c.key}), p.Timeout)
	defer cancel()
	resp, err = fn(bctx, txOnly{c.conn.Conn()})
	if err == nil && resp == nil {
		err = errNoResponse
	}
	if err != nil {
		return c.fail(bg, err)
	}
	if !s.cacheable(resp.Status) {
		c.rollback(bg)
		c.release(bg)
		resp.Outcome = OutcomeNotStored
		s.observe(p.Operation, OutcomeNotStored)
		return resp, false, nil
	}
	// The business ran: finish under a context the client's going away cannot cancel.
	cctx, endSpan := s.trace(bg, SpanComplete, p.Operation)
	resp, retry, err = c.complete(cctx, resp)
	endSpan(finished(resp, retry, err))
	return resp, retry, err
}

// begin returns the own-row lock of the business transaction: the one that traveled in
// the claim's flight, or, on a retry or after a claim sent apart, a new flight with BEGIN
// and the lock.
func (c *call) begin(ctx context.Context) (*step, error) {
	if lock := c.lock; lock != nil {
		c.lock = nil
		return lock, nil
	}
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	f := newFlight(c.conn.Conn(), c.s.wire)
	c.queueBegin(f)
	lock := c.lock
	c.lock = nil
	if err := f.run(ctx); err != nil {
		return nil, err
	}
	return lock, nil
}

// complete records resp and commits, in one flight: the fenced completion, then COMMIT.
// A completion that fails its fence raises, which aborts the transaction and so the
// COMMIT behind it.
func (c *call) complete(bg context.Context, resp *Response) (*Response, bool, error) {
	s, p := c.s, c.p
	headers, err := json.Marshal(resp.StoredHeader())
	if err != nil {
		return c.fail(bg, fmt.Errorf("idem: encode headers: %w", err))
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	f := newFlight(c.conn.Conn(), c.s.wire)
	var completed int32
	done := f.query(c.completeStmt(resp.Status, headers, body), &completed)
	commit := f.exec("commit")
	err = f.run(bg)
	var pgErr *pgconn.PgError
	switch {
	case fenceFailed(done.err):
		c.rollback(bg)
		return c.leaseLost(), false, nil
	case errors.As(done.err, &pgErr):
		// The server refused the completion, so it skipped the COMMIT.
		return c.fail(bg, fmt.Errorf("idem: complete: %w", done.err))
	case errors.As(commit.err, &pgErr):
		return c.fail(bg, fmt.Errorf("idem: commit: %w", commit.err))
	case err != nil:
		// No answer from the server: the commit may have happened. Do not release; the
		// lease and reclaim settle it.
		s.observe(p.Operation, OutcomeFailed)
		return nil, false, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	}
	resp.Outcome = OutcomeCompleted
	s.observe(p.Operation, OutcomeCompleted)
	return resp, false, nil
}

// completeStmt is CompleteKey, or CompleteKeyAt when the row is addressed by its ctid.
func (c *call) completeStmt(status int, headers json.RawMessage, body []byte) idemdb.Statement {
	st := pgtype.Int4{Int32: int32(status), Valid: true}
	retention := c.p.retention().Microseconds()
	if c.byRowID() {
		return idemdb.CompleteKeyAtParams{
			RowID: c.rowID, Scope: c.scope, Key: c.key, LeaseToken: c.token,
			ResponseStatus: st, ResponseHeaders: headers, ResponseBody: body, RetentionUs: retention,
		}.Statement()
	}
	return idemdb.CompleteKeyParams{
		Scope: c.scope, Key: c.key, LeaseToken: c.token,
		ResponseStatus: st, ResponseHeaders: headers, ResponseBody: body, RetentionUs: retention,
	}.Statement()
}

// fenceFailed reports the error CompleteKey raises when no row carries our token.
func fenceFailed(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22P02" && strings.Contains(pgErr.Message, "fence failed")
}

// fail rolls back; a serialization failure or deadlock is reported for retry, any other
// error releases the claim.
func (c *call) fail(bg context.Context, err error) (*Response, bool, error) {
	c.rollback(bg)
	if retryable(err) {
		return nil, true, err
	}
	c.s.observe(c.p.Operation, OutcomeFailed)
	c.release(bg)
	return nil, false, err
}

// rollback ends the business transaction, if one is open. A connection that fails it is
// closed by the pool when the call gives it back.
func (c *call) rollback(ctx context.Context) {
	if c.conn != nil && c.conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = c.conn.Exec(ctx, "rollback")
	}
}

func (c *call) leaseLost() *Response {
	return c.s.reject(c.p, OutcomeLeaseLost, http.StatusConflict,
		"this request's claim on the idempotency key was taken over by a retry; its work was rolled back", 1)
}

// release deletes our claim so a retry runs at once. Failure is tolerated: the lease
// bounds how long the claim blocks retries. The business connection goes back to the pool
// first (closed if it is broken): the release runs on a healthy one.
func (c *call) release(bg context.Context) {
	c.dropConn()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	n, err := c.s.q.ReleaseKey(ctx, idemdb.ReleaseKeyParams{Scope: c.scope, Key: c.key, LeaseToken: c.token})
	if err == nil && n == 1 {
		c.s.observe(c.p.Operation, OutcomeReleased)
	}
}

// retryable reports a serialization failure (40001) or deadlock (40P01): the transaction
// was rolled back and may simply run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}
