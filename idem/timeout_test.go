package idem

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// blockedBusiness returns a business function that inserts its row, then waits for an
// advisory lock the test holds (a business transaction waiting on a lock, honouring its
// context as pgx does) and, once it gets it, answers a valid 201. A watchdog lets go of
// the lock only after 10s, so a call the policy's timeout does not cancel completes (and
// the test says so) instead of hanging. The test holds the lock in a transaction, so that
// behind PgBouncer's transaction pooling it keeps its own server connection.
func (e *env) blockedBusiness(t *testing.T) Func {
	t.Helper()
	ctx := context.Background()
	holder, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_xact_lock(4242)"); err != nil {
		t.Fatal(err)
	}
	unlock := sync.OnceFunc(func() { _ = holder.Rollback(ctx) })
	watchdog := time.AfterFunc(10*time.Second, unlock)
	t.Cleanup(func() { watchdog.Stop(); unlock() })
	return func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := insertOne("x")(ctx, tx); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(4242)"); err != nil {
			return nil, err
		}
		return jsonResponse(http.StatusCreated, map[string]any{"id": 1})
	}
}

// The policy's timeout cancels a business run that would otherwise answer 201: the call
// fails with the context's deadline, within the watchdog's 10s, rolled back and released,
// and the retry executes.
func TestTimeoutCancelsBusiness(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Timeout = 50 * time.Millisecond
	r, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), e.blockedBusiness(t))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = %+v, %v; want the context's deadline (the 50ms timeout was not applied)", r, err)
	}
	if e.rows("") != 0 || e.keyRows() != 0 || e.count(OutcomeFailed) != 1 {
		t.Fatalf("after the timeout: %d rows, %d keys, failed %d; want 0, 0, 1", e.rows(""), e.keyRows(), e.count(OutcomeFailed))
	}
	// When the cancelled statement did not answer its cancel request in time, pgx closed
	// the connection, and the server rolls the transaction back (freeing the key) once its
	// backend notices: a moment later, not before Do returned. The retry comes after that.
	e.waitFor(`count(*) = 0 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
}

// The timeout also bounds a request without a key (an optional key, none sent), which runs
// in a plain transaction: cancelled, rolled back, nothing stored.
func TestTimeoutCancelsUnkeyedBusiness(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.KeyRequired = false
	p.Timeout = 50 * time.Millisecond
	r, err := e.store.Do(context.Background(), p, nil, parts("x"), e.blockedBusiness(t))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = %+v, %v; want the context's deadline (the 50ms timeout was not applied)", r, err)
	}
	if e.rows("") != 0 || e.keyRows() != 0 || e.count(OutcomeUnkeyed) != 1 {
		t.Fatalf("after the timeout: %d rows, %d keys, unkeyed %d; want 0, 0, 1", e.rows(""), e.keyRows(), e.count(OutcomeUnkeyed))
	}
}
