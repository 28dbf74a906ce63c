package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// ErrCommitUnknown is wrapped by the error of a call whose COMMIT got no answer (the
// connection was lost after the completion and COMMIT were sent): the business writes may
// or may not have committed. Nothing is left to release: if the COMMIT did not happen, the
// database rolls the transaction back (and frees the key) when it notices the connection is
// gone, at the latest when the lease's idle bound cuts it off. A retry with the same key
// settles the outcome: it replays the answer if the commit happened, and runs the request
// otherwise. [ResponseErrorHandler] answers such an error 503 saying so.
var ErrCommitUnknown = errors.New("idem: commit outcome unknown")

// ErrPoolExhausted is wrapped (with the acquire's [context.DeadlineExceeded]) by the
// error of a request that found no free connection in the store's pool within the
// acquire timeout ([WithAcquireTimeout]) while its own context was still live: nothing
// ran and no key was claimed, so a retry, with the same idempotency key, runs it.
// [ResponseErrorHandler] answers it 503 with Retry-After: 1.
var ErrPoolExhausted = errors.New("idem: no pool connection free within the acquire timeout")

// ErrSerializableOnCitus is the error of a request whose transaction would run at
// SERIALIZABLE (its policy's Isolation, or the database default) on a Citus cluster node:
// nothing ran and no key was claimed. Citus runs no distributed SERIALIZABLE, and on a
// worker a serialization failure found at COMMIT reaches the client as "could not commit
// transaction" (XX000), which cannot be told from a failed commit and retried; the claim's
// lock, taken alone under SERIALIZABLE (LockKeyOnly), would be on the entry node, not the
// key's. Use REPEATABLE READ (snapshot isolation, the business's own conflicts retried as
// 40001) or READ COMMITTED there. [Migrate] refuses a session whose default is
// SERIALIZABLE on a Citus node, so that a service finds out at start. Answered 500 by
// [ResponseErrorHandler].
var ErrSerializableOnCitus = errors.New("idem: SERIALIZABLE on a Citus cluster: Citus runs no distributed SERIALIZABLE; use REPEATABLE READ or READ COMMITTED")

// errNoResponse is the error of a business function that returned neither a response nor
// an error.
var errNoResponse = errors.New("idem: business function returned no response and no error")

// errRetry marks an attempt that ended in a serialization failure or deadlock: rolled
// back, run again.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// The error tests below declare errors.As's target only for a non-nil error: the target
// escapes to the heap, and declared first it would be allocated on every call, on the
// success path too.

// isRetry reports an errRetry.
func isRetry(err error) bool {
	_, ok := asRetry(err)
	return ok
}

// asRetry returns the errRetry err is or wraps.
func asRetry(err error) (errRetry, bool) {
	if err == nil {
		return errRetry{}, false
	}
	var retry errRetry
	ok := errors.As(err, &retry)
	return retry, ok
}

// pgError returns the server's error err is or wraps, or nil.
func pgError(err error) *pgconn.PgError {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}

// execute runs the business function in the transaction the claim opened (state
// claimFresh or claimTakeover), then completes the key and commits in one flight. A
// returned errRetry: rolled back after a serialization failure or deadlock, to be run again.
func (c *call) execute(ctx context.Context, state claimState, fn Func) (resp *Response, err error) {
	ctx, endSpan := c.s.trace(ctx, SpanBusiness, c.p.Operation)
	defer func() { endSpan(finished(resp, isRetry(err), err)) }()
	s, p := c.s, c.p
	bg := context.WithoutCancel(ctx)
	over := state == claimTakeover
	if c.snapshot && !c.rowClaimed {
		retry, err := c.claimRow(ctx)
		if err != nil {
			c.rollback(bg)
			if retry {
				return nil, errRetry{err}
			}
			s.observe(p.Operation, OutcomeFailed)
			return nil, err
		}
		c.rowClaimed = true
	}
	if c.rowClaimed {
		over = true
	}
	if state == claimTakeover {
		s.observe(p.Operation, OutcomeTakenOver)
	} else {
		s.observe(p.Operation, OutcomeClaimed)
	}
	// A panicking business function is a business error (net/http recovers the panic and
	// the process lives on): roll back, then let the panic continue.
	defer func() {
		if v := recover(); v != nil {
			c.rollback(bg)
			s.observe(p.Operation, OutcomeFailed)
			panic(v)
		}
	}()
	bctx, cancel := withTimeout(context.WithValue(ctx, ctxKey{}, KeyInfo{Scope: c.scope, Key: c.key}), p.Timeout)
	c.tx = txOnly{c.conn.Conn()}
	resp, err = fn(bctx, &c.tx) // a pointer: no Tx interface value to allocate
	cancel()
	if err == nil && resp == nil {
		err = errNoResponse
	}
	if err != nil {
		return c.fail(bg, err)
	}
	if !s.cacheable(resp.Status) {
		c.rollback(bg)
		resp.Outcome = OutcomeNotStored
		s.observe(p.Operation, OutcomeNotStored)
		return resp, nil
	}
	// The business ran: finish under a context the client's going away cannot cancel.
	cctx, endComplete := s.trace(bg, SpanComplete, p.Operation)
	resp, err = c.complete(cctx, resp, over)
	endComplete(finished(resp, isRetry(err), err))
	return resp, err
}

// complete writes the key's row with resp and commits, in one flight. over: the row
// exists (a takeover, or our own ClaimKeyRow row) and is written by CompleteKeyOver, else
// CompleteKey inserts it. A unique violation (or CompleteKeyOver's refusal) means another
// writer won: the transaction is rolled back and the answer comes from its row.
func (c *call) complete(bg context.Context, resp *Response, over bool) (*Response, error) {
	s, p := c.s, c.p
	headers, err := encodeStoredHeader(resp)
	if err != nil {
		return c.fail(bg, fmt.Errorf("idem: encode headers: %w", err))
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	f := newFlight(c.conn.Conn(), s.wire)
	defer f.release()
	st := pgtype.Int4{Int32: int32(resp.Status), Valid: true}
	retention := p.retention().Microseconds()
	var done *step
	if over {
		var completed int32
		done = f.query(idemdb.CompleteKeyOverParams{
			Scope: c.scope, Key: c.key, Operation: p.Operation, Fingerprint: c.fp,
			ResponseStatus: st, ResponseHeaders: headers, ResponseBody: body, RetentionUs: retention,
		}.Statement(), &completed)
	} else {
		done = f.query(idemdb.CompleteKeyParams{
			Scope: c.scope, Key: c.key, Operation: p.Operation, Fingerprint: c.fp,
			ResponseStatus: st, ResponseHeaders: headers, ResponseBody: body, RetentionUs: retention,
		}.Statement())
	}
	commit := f.exec("commit")
	// bg cannot be cancelled: pgx does not watch it, and the flight's deadline is the
	// socket's (flightDeadline).
	fctx, d := s.boundFlights(bg, c.conn.Conn())
	err = d.err(f.run(fctx))
	d.end()
	switch {
	case lostToAnotherWriter(done.err):
		c.rollback(bg)
		return c.answerWinner(bg)
	case pgError(done.err) != nil:
		// The server refused the completion, so it skipped the COMMIT.
		return c.fail(bg, fmt.Errorf("idem: complete: %w", done.err))
	case pgError(commit.err) != nil:
		return c.fail(bg, fmt.Errorf("idem: commit: %w", commit.err))
	case err != nil && pgconn.SafeToRetry(err):
		// Nothing of the flight reached the server: the connection is closed, and with it
		// the transaction rolls back.
		s.observe(p.Operation, OutcomeFailed)
		return nil, fmt.Errorf("idem: complete: %w", err)
	case err != nil:
		// No answer from the server: the commit may have happened.
		s.observe(p.Operation, OutcomeFailed)
		return nil, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	}
	resp.Outcome = OutcomeCompleted
	s.observe(p.Operation, OutcomeCompleted)
	if p.Wait > 0 {
		c.committed = &keyRow{operation: p.Operation, fingerprint: c.fp, status: "completed",
			responseStatus: resp.Status, headers: headers, body: bytes.Clone(body)}
	}
	return resp, nil
}

// lostToAnotherWriter reports the completion's errors that mean another writer completed
// the key first: CompleteKey's unique violation, CompleteKeyOver's refusal.
func lostToAnotherWriter(err error) bool {
	pgErr := pgError(err)
	if pgErr == nil {
		return false
	}
	return pgErr.Code == "23505" && pgErr.ConstraintName == "idempotency_keys_pkey" ||
		pgErr.Code == "22P02" && strings.Contains(pgErr.Message, "taken by another writer")
}

// answerWinner answers from the row of the writer that completed the key before us (our
// business writes were rolled back).
func (c *call) answerWinner(bg context.Context) (*Response, error) {
	r, err := c.getKey(bg)
	if errors.Is(err, pgx.ErrNoRows) {
		// Completed and purged or rolled back since: run the request again.
		return nil, errRetry{errors.New("idem: the key's winning row is gone")}
	}
	if err != nil {
		c.s.observe(c.p.Operation, OutcomeFailed)
		return nil, fmt.Errorf("idem: read the key's row: %w", err)
	}
	return c.answer(committedRow(r)), nil
}

// fail rolls back; a serialization failure or deadlock becomes an errRetry.
func (c *call) fail(bg context.Context, err error) (*Response, error) {
	c.rollback(bg)
	if retryable(err) {
		return nil, errRetry{err}
	}
	c.s.observe(c.p.Operation, OutcomeFailed)
	return nil, err
}

// rollback ends the transaction, if one is open, within a flight's deadline. A connection
// that fails it is closed (by pgx, or by the pool when the call gives it back): the
// database rolls the transaction back then.
func (c *call) rollback(ctx context.Context) {
	if c.conn == nil || c.conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	conn := c.conn.Conn()
	fctx, d := c.s.boundFlights(context.WithoutCancel(ctx), conn)
	defer d.end()
	if _, err := conn.Exec(fctx, "rollback"); err != nil {
		_ = conn.PgConn().Close(fctx) // within the same deadline
	}
}

// retryable reports a serialization failure (40001) or deadlock (40P01): the transaction
// was rolled back and may simply run again.
func retryable(err error) bool {
	pgErr := pgError(err)
	return pgErr != nil && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}
