package idem

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// A client that goes away during a flight: the claim's flight, which runs under the
// request's context, ends at once (context.Canceled, nothing ran, the connection closed
// and the key free), whatever the flight timeout; the completion's flight, which runs
// under a context the client cannot cancel, does not end with it. pgx's context watcher
// sets the same socket deadline as the flight (and lifts it at the end of its watch).

// newOneConnEnvWith is newOneConnEnv with the flight timeout ft, the store pool's
// configuration changed by configure, and its sockets deadlineConns.
func newOneConnEnvWith(t *testing.T, ft time.Duration, configure func(*pgxpool.Config)) *env {
	t.Helper()
	url := pgtest.NewDB(t)
	e := newEnvOn(t, url)
	e.store = NewStore(oneConnPool(t, url, configure), WithFlightTimeout(ft), e.observer())
	return e
}

// oneConnPool is a pool of one connection to url whose sockets are deadlineConns, its
// configuration changed by configure (when not nil); closed at cleanup.
func oneConnPool(t *testing.T, url string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	recordDeadlines(cfg)
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// waitForLockWait waits until a backend of e's database waits on a lock running a
// statement that contains text.
func (e *env) waitForLockWait(text string) {
	e.waitFor(`count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0
		AND datname = current_database()`, text)
}

// longFlightTimeout is a flight timeout no test waits for: a call that returns within
// flightBound did not end at it.
const longFlightTimeout = time.Minute

// The client goes away while the claim's flight waits on the server: the call ends at
// once with the client's context.Canceled (not a flight timeout, not an unknown commit),
// and once the server has let the key go a retry executes once.
func TestClaimFlightClientGone(t *testing.T) {
	e := newOneConnEnvWith(t, longFlightTimeout, nil)
	p := policy("createThing")
	release := e.holdLock(t, "LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		r    *Response
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	ran := make(chan struct{}, 1)
	go func() {
		r, err := e.store.Do(ctx, p, ptr("k"), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
			ran <- struct{}{}
			return insertOne("x")(ctx, tx)
		})
		done <- result{r: r, err: err}
	}()
	e.waitForLockWait("pg_try_advisory_xact_lock")
	cancelled := time.Now()
	cancel()
	res := <-done
	res.took = time.Since(cancelled)
	if !errors.Is(res.err, context.Canceled) || errors.Is(res.err, context.DeadlineExceeded) || errors.Is(res.err, ErrCommitUnknown) {
		t.Fatalf("Do with the client gone during its claim flight = %+v, %v; want context.Canceled", res.r, res.err)
	}
	if res.took > flightBound {
		t.Fatalf("Do returned %v after its client went away; want at once (bound %v)", res.took, flightBound)
	}
	select {
	case <-ran:
		t.Fatal("the business ran")
	default:
	}
	release()
	e.cutFlightGone()
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
	e.nextUserOutlivesFlightTimeout(t, "a claim whose client went away, and its retry")
	if n := e.rows(""); n != 1 {
		t.Fatalf("%d business rows, want 1", n)
	}
}

// The client goes away while the completion's flight waits on the server (its INSERT of
// the key's row waits on another transaction's uncommitted row of the key): the flight is
// not cut; once the other transaction rolls back, the call completes and commits once.
func TestCompletionFlightOutlivesClient(t *testing.T) {
	e := newOneConnEnvWith(t, longFlightTimeout, nil)
	p := policy("createThing")
	release := e.holdLock(t, `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, expires_at)
		VALUES ('', 'k', 'other', '\x00', 'processing', now())`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		r   *Response
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := e.store.Do(ctx, p, ptr("k"), parts("x"), insertOne("x"))
		done <- result{r, err}
	}()
	e.waitForLockWait("INSERT INTO idempotency_keys")
	cancel()
	release()
	res := <-done
	if res.err != nil || res.r.Outcome != OutcomeCompleted {
		t.Fatalf("Do with the client gone during its completion flight = %+v, %v; want completed", res.r, res.err)
	}
	if n, k := e.rows(""), e.keyRows(); n != 1 || k != 1 {
		t.Fatalf("%d business rows, %d keys; want 1, 1", n, k)
	}
	e.nextUserOutlivesFlightTimeout(t, "a completion whose client went away")
}
