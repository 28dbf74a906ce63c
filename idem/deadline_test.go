package idem

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// The flight deadlines ([WithFlightTimeout]) are tested here with statements the server
// cannot answer until the test lets them (a lock the test holds), not with a broken
// network: examples/payments/reliability cuts the link with toxiproxy.

// flightTimeout is the flight deadline of these tests: long enough for a healthy flight
// on a loaded machine, short enough to wait for.
const flightTimeout = 300 * time.Millisecond

// flightBound is how long past its start a call with one stalled flight may return: the
// flight timeout plus a loaded machine's slack. Not a measurement: a bound that a
// flight without a deadline (held for as long as the test holds its lock) breaks.
const flightBound = 5 * time.Second

// newOneConnEnv is newEnv with a pool of one connection, so that every call runs on the
// connection the call before it left, and the store's flight timeout flightTimeout.
func newOneConnEnv(t *testing.T) *env {
	t.Helper()
	url := pgtest.NewDB(t)
	e := newEnvOn(t, url)
	e.store = NewStore(pgtest.PoolWithMax(t, url, 1), WithFlightTimeout(flightTimeout), e.observer())
	return e
}

// holdLock starts a transaction on e's test pool that runs stmt and holds what it locked
// until the returned function (also run at cleanup) rolls it back.
func (e *env) holdLock(t *testing.T, stmt string, args ...any) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, stmt, args...); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// stalledDo runs one request whose flight the test's lock stalls, and fails t unless it
// ends within flightBound: past it the lock is released (so that the request, and the
// test, end) and the test fails.
func (e *env) stalledDo(t *testing.T, p *Policy, key string, release func()) (*Response, error) {
	t.Helper()
	type result struct {
		r   *Response
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := e.store.Do(context.Background(), p, ptr(key), parts("x"), insertOne("x"))
		done <- result{r, err}
	}()
	bound := time.NewTimer(flightBound)
	defer bound.Stop()
	select {
	case res := <-done:
		return res.r, res.err
	case <-bound.C:
		release()
		res := <-done
		t.Fatalf("a request with a stalled flight ran past %v (the flight timeout: %v): %+v, %v", flightBound, flightTimeout, res.r, res.err)
		return nil, nil
	}
}

// noClaimsHeld waits until no claim is held in e's database: a connection idem closed
// after a flight deadline is gone from the server a moment after the call returned.
func (e *env) noClaimsHeld() {
	e.waitFor(`count(*) = 0 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
}

// cutFlightGone waits, once the test's lock is released, until the statement of the
// flight it stalled has ended on the server too: no claim held and no other transaction
// open in e's database. A connection idem closed at a flight deadline can leave its
// statement waiting on the lock; once the lock is gone that statement runs, and may take
// the key's lock, until the server (or, behind a pooler, the pooler's cancel) ends it: a
// retry in that moment is answered 409, correctly, and the test would read it as a failure.
func (e *env) cutFlightGone() {
	e.waitFor(`count(*) = 0 FROM pg_stat_activity WHERE datname = current_database()
		AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`)
	e.noClaimsHeld()
}

// A claim flight the server does not answer (the table locked by another transaction)
// fails at the flight deadline, with the context's deadline error, and nothing runs; once
// the lock is gone the retry executes once.
func TestClaimFlightDeadline(t *testing.T) {
	e := newOneConnEnv(t)
	p := policy("createThing")
	release := e.holdLock(t, "LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
	r, err := e.stalledDo(t, p, "k", release)
	if !errors.Is(err, context.DeadlineExceeded) || !pgconn.Timeout(err) || errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("Do with its claim flight stalled = %+v, %v; want a flight timeout before the commit", r, err)
	}
	release()
	e.cutFlightGone()
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
	if n := e.rows(""); n != 1 {
		t.Fatalf("%d business rows, want 1", n)
	}
}

// A completion flight the server does not answer (its INSERT of the key's row waits on
// another transaction's uncommitted row of the same key, which took no lock) fails at the
// flight deadline as an unknown commit outcome: the connection is closed, the server rolls
// the transaction back, and nothing of it remains.
func TestCompletionFlightDeadline(t *testing.T) {
	e := newOneConnEnv(t)
	p := policy("createThing")
	release := e.holdLock(t, `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, expires_at)
		VALUES ('', 'k', 'other', '\x00', 'processing', now())`)
	r, err := e.stalledDo(t, p, "k", release)
	if !errors.Is(err, ErrCommitUnknown) || !errors.Is(err, context.DeadlineExceeded) || !pgconn.Timeout(err) {
		t.Fatalf("Do with its completion flight stalled = %+v, %v; want an unknown commit outcome at the flight deadline", r, err)
	}
	// pgx cancels the stalled statement of the connection it closed: the transaction ends
	// (its claim's lock goes) while the test still holds the row it waited on, so its
	// COMMIT, already sent, never runs. (Released first, the INSERT could go on and the
	// COMMIT commit: an outcome that is unknown indeed.)
	e.noClaimsHeld()
	release()
	if n, k := e.rows(""), e.keyRows(); n != 0 || k != 0 {
		t.Fatalf("after the cut completion: %d business rows, %d keys; want 0, 0", n, k)
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
}

// The flight deadline bounds the protocol's own flights only: business statements that
// run longer than it (on the one connection every flight of these calls ran on: after a
// completion, a replay, a 409's rollback, a request without a key) complete.
func TestFlightDeadlineDoesNotBoundBusiness(t *testing.T) {
	e := newOneConnEnv(t)
	p := policy("createThing")
	slow := func(payload string) Func {
		return func(ctx context.Context, tx Tx) (*Response, error) {
			if _, err := tx.Exec(ctx, "SELECT pg_sleep($1::float8)", (flightTimeout * 3 / 2).Seconds()); err != nil {
				return nil, err
			}
			return insertOne(payload)(ctx, tx)
		}
	}
	ctx := context.Background()
	if r := e.do(p, "k1", "x", slow("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("first slow business: %s, want completed", r.Outcome)
	}
	if r := e.do(p, "k2", "x", slow("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("slow business after a completion: %s, want completed", r.Outcome)
	}
	if r := e.do(p, "k1", "x", slow("x")); r.Outcome != OutcomeReplayed {
		t.Fatalf("retry of k1: %s, want replayed", r.Outcome)
	}
	if r := e.do(p, "k3", "x", slow("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("slow business after a replay: %s, want completed", r.Outcome)
	}
	if r := e.do(p, "k4", "x", func(context.Context, Tx) (*Response, error) {
		return &Response{Status: http.StatusServiceUnavailable, Body: []byte("later")}, nil
	}); r.Outcome != OutcomeNotStored {
		t.Fatalf("a 503: %s, want not stored", r.Outcome)
	}
	if r := e.do(p, "k5", "x", slow("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("slow business after a rollback: %s, want completed", r.Outcome)
	}
	unkeyed := policy("createThing")
	unkeyed.KeyRequired = false
	for i := range 2 {
		if r, err := e.store.Do(ctx, unkeyed, nil, parts("x"), slow("x")); err != nil || r.Outcome != OutcomeUnkeyed {
			t.Fatalf("slow business without a key (%d): %+v, %v", i, r, err)
		}
	}
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		q := policy("createThing")
		q.Isolation = iso
		if r := e.do(q, "k-"+string(iso), "x", slow("x")); r.Outcome != OutcomeCompleted {
			t.Fatalf("slow business at %s: %s, want completed", iso, r.Outcome)
		}
	}
	if n := e.rows(""); n != 8 {
		t.Fatalf("%d business rows, want 8", n)
	}
}

// noDeadlineConn is a connection that refuses deadlines, as some tunnels' do.
type noDeadlineConn struct{ net.Conn }

var errNoDeadlines = errors.New("this connection takes no deadlines")

func (noDeadlineConn) SetDeadline(time.Time) error      { return errNoDeadlines }
func (noDeadlineConn) SetReadDeadline(time.Time) error  { return errNoDeadlines }
func (noDeadlineConn) SetWriteDeadline(time.Time) error { return errNoDeadlines }

// On connections that refuse socket deadlines, the flight timeout is a context's, as
// before: with pgx's cancel-request context watcher, a stalled claim flight is cancelled
// by the server at the flight deadline, and the call ends.
func TestFlightDeadlineWithoutSocketDeadlines(t *testing.T) {
	url := pgtest.NewDB(t)
	e := newEnvOn(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := new(net.Dialer).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return noDeadlineConn{c}, nil
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: time.Second}
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.store = NewStore(pool, WithFlightTimeout(flightTimeout))
	p := policy("createThing")
	if r := e.do(p, "k0", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("before the stall: %s, want completed", r.Outcome)
	}
	release := e.holdLock(t, "LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
	if r, err := e.stalledDo(t, p, "k", release); err == nil {
		t.Fatalf("Do with its claim flight stalled = %+v; want an error", r)
	}
	release()
	e.cutFlightGone()
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
}
