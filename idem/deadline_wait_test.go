package idem

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// newWaiterStore is a store on e's database whose one connection's socket is a
// deadlineConn, with the flight timeout flightTimeout.
func newWaiterStore(t *testing.T, e *env) *env {
	t.Helper()
	w := &env{t: t, url: e.url, pool: e.pool, outcomes: map[Outcome]int{}}
	w.store = NewStore(oneConnPool(t, e.url, nil), WithFlightTimeout(flightTimeout))
	return w
}

// A duplicate that waits for its key's owner in the database (AwaitKey: the owner runs in
// another store, as in another process) leaves no socket deadline on its connection,
// whether the owner answers within the wait (replay) or not (409), and its connection's
// next user runs longer than the flight timeout.
func TestWaiterInTheDatabaseLeavesNoFlightDeadline(t *testing.T) {
	e := newOneConnEnv(t) // the owner's store
	w := newWaiterStore(t, e)
	p := policy("createThing")
	ctx := context.Background()

	for _, tc := range []struct {
		name string
		wait time.Duration
		want int
	}{
		{"owner answers within the wait", time.Minute, http.StatusCreated},
		{"owner still running when the wait ends", 100 * time.Millisecond, http.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-" + tc.name
			q := *p
			q.Wait = tc.wait
			holder, err := e.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = holder.Rollback(ctx) }()
			if _, err := holder.Exec(ctx, "SELECT pg_advisory_xact_lock(4343)"); err != nil {
				t.Fatal(err)
			}
			owner := make(chan *Response, 1)
			go func() {
				r, err := e.store.Do(ctx, &q, ptr(key), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
					if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(4343)"); err != nil {
						return nil, err
					}
					return insertOne("x")(ctx, tx)
				})
				if err != nil {
					t.Errorf("owner: %v", err)
				}
				owner <- r
			}()
			e.waitFor(`count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'advisory' AND position('4343' in query) > 0`)
			dup := make(chan *Response, 1)
			go func() {
				r, err := w.store.Do(ctx, &q, ptr(key), parts("x"), insertOne("x"))
				if err != nil {
					t.Errorf("waiter: %v", err)
				}
				dup <- r
			}()
			var r *Response
			if tc.want == http.StatusConflict {
				r = <-dup
			} else {
				// The waiter waits on the key's lock in the database, then the owner ends.
				e.waitFor(`count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'advisory' AND position('AwaitKey' in query) > 0`)
			}
			if err := holder.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if o := <-owner; o == nil || o.Outcome != OutcomeCompleted {
				t.Fatalf("owner: %+v, want completed", o)
			}
			if r == nil {
				r = <-dup
			}
			if r == nil || r.Status != tc.want {
				t.Fatalf("waiter: %+v, want %d", r, tc.want)
			}
			if tc.want == http.StatusCreated && r.Outcome != OutcomeReplayed {
				t.Fatalf("waiter: %s, want replayed", r.Outcome)
			}
			w.nextUserOutlivesFlightTimeout(t, "a wait: "+tc.name)
			w.slowNextStatement(t)
		})
	}
}
