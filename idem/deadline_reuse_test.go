package idem

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// The flights' socket deadline never stays on a connection once the call is over: after
// each way a call can end (completion, replay, 409, 422, a 503's rollback, a business
// error, a completion lost to another writer, the REPEATABLE READ and SERIALIZABLE claims'
// paths), the connection's socket has no deadline, and its next user (a statement of its
// own on the store's pool, the purger) runs longer than the flight timeout, in every exec
// mode. The socket is wrapped (pgconn's AfterNetConnect) to read its deadline.

// deadlineConn is a net.Conn that remembers the deadlines set on it.
type deadlineConn struct {
	net.Conn
	mu          sync.Mutex
	read, write time.Time
	sets        int // SetDeadline calls since deadlines last read them
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.read, c.write = t, t
	c.sets++
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.read = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.write = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// deadlines returns the socket's read and write deadlines and the number of SetDeadline
// calls since the last call.
func (c *deadlineConn) deadlines() (read, write time.Time, sets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sets, c.sets = c.sets, 0
	return c.read, c.write, sets
}

// recordDeadlines makes cfg's connections deadlineConns.
func recordDeadlines(cfg *pgxpool.Config) {
	cfg.ConnConfig.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
		return &deadlineConn{Conn: c}, nil
	}
}

// socketOf returns the deadlineConn under a pooled connection.
func socketOf(t *testing.T, c *pgxpool.Conn) *deadlineConn {
	t.Helper()
	dc, ok := c.Conn().PgConn().Conn().(*deadlineConn)
	if !ok {
		t.Fatalf("the connection's socket is a %T, not a deadlineConn", c.Conn().PgConn().Conn())
	}
	return dc
}

// newOneConnEnvMode is newOneConnEnv with the store's pool in exec mode mode, its sockets
// deadlineConns.
func newOneConnEnvMode(t *testing.T, mode pgx.QueryExecMode) *env {
	t.Helper()
	return newOneConnEnvWith(t, flightTimeout, func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = mode })
}

// nextUserOutlivesFlightTimeout checks that the store's one connection has no deadline
// on its socket, that a flight set one since the last check (the call ran flights on
// it), and that a purge runs on it.
func (e *env) nextUserOutlivesFlightTimeout(t *testing.T, after string) {
	t.Helper()
	ctx := context.Background()
	c, err := e.store.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read, write, sets := socketOf(t, c).deadlines()
	c.Release()
	if !read.IsZero() || !write.IsZero() {
		t.Fatalf("after %s: the connection went back to the pool with socket deadlines %v (read), %v (write)", after, read, write)
	}
	if sets == 0 {
		t.Fatalf("after %s: no flight set a socket deadline", after)
	}
	if _, err := e.store.Purge(ctx, 100); err != nil {
		t.Fatalf("after %s: purge: %v", after, err)
	}
}

// slowNextStatement runs a statement longer than the flight timeout on the store's one
// connection.
func (e *env) slowNextStatement(t *testing.T) {
	t.Helper()
	if _, err := e.store.pool.Exec(context.Background(), "SELECT pg_sleep($1::float8)", (flightTimeout * 3 / 2).Seconds()); err != nil {
		t.Fatalf("the connection's next statement, longer than the flight timeout: %v", err)
	}
}

func TestFlightDeadlineLeftOnNoConnection(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			skipPreparedBehindPooler(t, mode)
			e := newOneConnEnvMode(t, mode)
			p := policy("createThing")
			if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
				t.Fatalf("first call: %s", r.Outcome)
			}
			e.nextUserOutlivesFlightTimeout(t, "a completion")
			if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeReplayed {
				t.Fatalf("replay: %s", r.Outcome)
			}
			e.nextUserOutlivesFlightTimeout(t, "a replay")
			if r := e.do(p, "k", "y", insertOne("y")); r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("another payload: %d", r.Status)
			}
			e.nextUserOutlivesFlightTimeout(t, "a 422")
			if r := e.do(p, "k503", "x", func(context.Context, Tx) (*Response, error) {
				return &Response{Status: http.StatusServiceUnavailable}, nil
			}); r.Outcome != OutcomeNotStored {
				t.Fatalf("a 503: %s", r.Outcome)
			}
			e.nextUserOutlivesFlightTimeout(t, "a rollback")
			if _, err := e.store.Do(context.Background(), p, ptr("kerr"), parts("x"), func(context.Context, Tx) (*Response, error) {
				return nil, errBusiness
			}); err == nil {
				t.Fatal("a business error: no error")
			}
			e.nextUserOutlivesFlightTimeout(t, "a business error")

			// 409: the key's lock held by another transaction.
			hi, lo := lockHalves(LockID("", "kbusy"))
			release := e.holdLock(t, "SELECT pg_advisory_xact_lock($1, $2)", hi, lo)
			if r := e.do(p, "kbusy", "x", insertOne("x")); r.Status != http.StatusConflict {
				t.Fatalf("a held key: %d", r.Status)
			}
			e.nextUserOutlivesFlightTimeout(t, "a 409")
			release()

			// A completion lost to another writer (the key's row committed by a
			// transaction that took no lock while ours waited on it): rolled back, answered
			// from the winner's row (getKey after the completion's flight).
			e.lostCompletion(t, p, "kwin")
			e.nextUserOutlivesFlightTimeout(t, "a lost completion")

			for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
				q := policy("createThing")
				q.Isolation = iso
				key := "k-" + string(iso)
				if r := e.do(q, key, "x", insertOne("x")); r.Outcome != OutcomeCompleted {
					t.Fatalf("%s: %s", iso, r.Outcome)
				}
				e.nextUserOutlivesFlightTimeout(t, "a completion at "+string(iso))
				if r := e.do(q, key, "x", insertOne("x")); r.Outcome != OutcomeReplayed {
					t.Fatalf("%s replay: %s", iso, r.Outcome)
				}
				e.nextUserOutlivesFlightTimeout(t, "a replay at "+string(iso))
				hi, lo := lockHalves(LockID("", key+"-busy"))
				release := e.holdLock(t, "SELECT pg_advisory_xact_lock($1, $2)", hi, lo)
				if r := e.do(q, key+"-busy", "x", insertOne("x")); r.Status != http.StatusConflict {
					t.Fatalf("%s held key: %d", iso, r.Status)
				}
				e.nextUserOutlivesFlightTimeout(t, "a 409 at "+string(iso))
				release()
			}
			e.slowNextStatement(t)
		})
	}
}

// lostCompletion runs a call on key whose completion waits on another transaction's
// uncommitted row of the key (written without the key's lock), which then commits: the
// call's INSERT fails on the primary key and the call answers from that row.
func (e *env) lostCompletion(t *testing.T, p *Policy, key string) {
	t.Helper()
	ctx := context.Background()
	fp, err := Fingerprint(p.Operation, parts("x")...)
	if err != nil {
		t.Fatal(err)
	}
	winner, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = winner.Rollback(ctx) }()
	if _, err := winner.Exec(ctx, `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status,
		response_status, response_headers, response_body, completed_at, expires_at)
		VALUES ('', $1, $2, $3, 'completed', 201, '[]', 'won', now(), now() + interval '1 hour')`,
		key, p.Operation, fp); err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   *Response
		err error
	}
	done := make(chan result, 1)
	ran := make(chan struct{}, 1)
	go func() {
		r, err := e.store.Do(ctx, p, ptr(key), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
			ran <- struct{}{}
			return insertOne("x")(ctx, tx)
		})
		done <- result{r, err}
	}()
	// The call's completion waits on the winner's row.
	e.waitFor(`count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%INSERT INTO idempotency_keys%'
		AND datname = current_database()`)
	if err := winner.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	select {
	case <-ran:
	default:
		t.Fatal("the business did not run: the call did not reach its completion")
	}
	if res.err != nil || res.r.Outcome != OutcomeReplayed || string(res.r.Body) != "won" {
		t.Fatalf("a lost completion: %+v, %v; want the winner's replay", res.r, res.err)
	}
}

// The stalled claim flight and the stalled completion flight end at the flight timeout in
// every exec mode (in cache_statement mode the claim stalls in its first Prepare, which
// reads the locked table; in the others, in the flight's pipeline), with the errors of
// TestClaimFlightDeadline and TestCompletionFlightDeadline; the retry runs on a fresh
// connection without a deadline.
func TestStalledFlightsInEveryExecMode(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			skipPreparedBehindPooler(t, mode)
			newOneConnEnvMode(t, mode).stalledFlights(t)
		})
	}
}

// stalledFlights runs TestStalledFlightsInEveryExecMode's calls on e, whose store has the
// flight timeout flightTimeout and one connection, a deadlineConn.
func (e *env) stalledFlights(t *testing.T) {
	t.Helper()
	p := policy("createThing")
	ctx := context.Background()

	release := e.holdLock(t, "LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
	start := time.Now()
	_, err := e.store.Do(ctx, p, ptr("k"), parts("x"), insertOne("x"))
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || !pgconn.Timeout(err) ||
		errors.Is(err, ErrCommitUnknown) || took > flightBound {
		t.Fatalf("stalled claim flight: %v after %v; want a flight timeout before the commit within %v", err, took, flightBound)
	}
	release()
	e.cutFlightGone()

	release = e.holdLock(t, `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, expires_at)
		VALUES ('', 'k', 'other', '\x00', 'processing', now())`)
	start = time.Now()
	_, err = e.store.Do(ctx, p, ptr("k"), parts("x"), insertOne("x"))
	if took := time.Since(start); !errors.Is(err, ErrCommitUnknown) || !errors.Is(err, context.DeadlineExceeded) || took > flightBound {
		t.Fatalf("stalled completion flight: %v after %v; want an unknown commit outcome within %v", err, took, flightBound)
	}
	e.noClaimsHeld()
	release()
	if n, k := e.rows(""), e.keyRows(); n != 0 || k != 0 {
		t.Fatalf("after the cut completion: %d business rows, %d keys; want 0, 0", n, k)
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
	e.nextUserOutlivesFlightTimeout(t, "the retry of two cut flights")
	e.slowNextStatement(t)
}

// skipPreparedBehindPooler skips a subtest that runs pgx's cache_statement mode when the
// suite runs behind a transaction pooler (internal/pgbouncer sets default_query_exec_mode
// in the URL): named prepared statements do not survive between its transactions.
func skipPreparedBehindPooler(t *testing.T, mode pgx.QueryExecMode) {
	t.Helper()
	if mode == pgx.QueryExecModeCacheStatement && strings.Contains(pgtest.URL(t), "default_query_exec_mode=") {
		t.Skip("behind a transaction pooler (the URL sets default_query_exec_mode): named prepared statements do not survive between transactions")
	}
}
