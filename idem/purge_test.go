package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// purgeEnv is a store on a fresh database and the keys it created through the protocol.
type purgeEnv struct {
	t     *testing.T
	pool  *pgxpool.Pool
	store *idem.Store
	n     int
}

func newPurgeEnv(t *testing.T) *purgeEnv {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return &purgeEnv{t: t, pool: pool, store: idem.NewStore(pool)}
}

// complete creates n completed keys kept for retention.
func (e *purgeEnv) complete(n int, retention time.Duration) {
	e.t.Helper()
	p := &idem.Policy{Operation: "op", KeySource: "header Idempotency-Key", KeyRequired: true, Lease: time.Millisecond, Retention: retention}
	ok := func(context.Context, idem.Tx) (*idem.Response, error) {
		return idem.Record(func(w http.ResponseWriter) error { w.WriteHeader(http.StatusNoContent); return nil })
	}
	for range n {
		e.n++
		key := fmt.Sprintf("k%d", e.n)
		if _, err := e.store.Do(context.Background(), p, &key, nil, ok); err != nil {
			e.t.Fatal(err)
		}
	}
}

// count returns the number of rows matching where, by the database clock.
func (e *purgeEnv) count(where string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys WHERE "+where).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// waitExpired waits for the database clock to pass the retention of n rows.
func (e *purgeEnv) waitExpired(n int) {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.count("expires_at <= clock_timestamp()") < n; {
		if time.Now().After(deadline) {
			e.t.Fatalf("fewer than %d keys expired after 10s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPurgerDeletesExpiredKeysEachInterval(t *testing.T) {
	e := newPurgeEnv(t)
	e.complete(5, time.Millisecond)
	e.complete(3, time.Hour)
	e.waitExpired(5)

	reports := make(chan idem.PurgeResult, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		idem.NewPurger(e.store, 10*time.Millisecond, 2, func(r idem.PurgeResult) { reports <- r }).Run(ctx)
	}()

	// The first pass runs at once and deletes every expired row, 2 per batch.
	if r := <-reports; r.Err != nil || r.Deleted != 5 {
		t.Fatalf("first pass: %+v, want 5 deleted", r)
	}
	if left := e.count("true"); left != 3 {
		t.Fatalf("%d rows left, want the 3 live ones", left)
	}

	// Later passes pick up keys that expire later (they may do so before waitExpired could
	// see them expired: the purger runs every 10ms).
	e.complete(4, time.Millisecond)
	var total int64
	for total < 4 {
		select {
		case r := <-reports:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			total += r.Deleted
		case <-time.After(10 * time.Second):
			t.Fatalf("later passes deleted %d rows in 10s, want 4", total)
		}
	}
	if total != 4 || e.count("true") != 3 {
		t.Fatalf("later passes deleted %d rows (want 4), %d left (want 3)", total, e.count("true"))
	}

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// A failing pass is reported with its error, and the loop goes on.
func TestPurgerReportsFailuresAndContinues(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t)) // no idempotency_keys table
	reports := make(chan idem.PurgeResult, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go idem.NewPurger(idem.NewStore(pool), time.Millisecond, 0, func(r idem.PurgeResult) { reports <- r }).Run(ctx)
	for i := range 2 {
		r := <-reports
		if r.Err == nil || r.Deleted != 0 {
			t.Fatalf("pass %d on a database without the table: %+v, want an error", i, r)
		}
	}
}

// With its context already ended, Run returns without a pass.
func TestPurgerCancelledBeforeStart(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	passes := 0
	idem.NewPurger(idem.NewStore(pool), time.Millisecond, 0, func(idem.PurgeResult) { passes++ }).Run(ctx)
	if passes != 0 {
		t.Fatalf("%d passes after the context ended", passes)
	}
}
