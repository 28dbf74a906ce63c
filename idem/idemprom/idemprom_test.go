package idemprom

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMetrics(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	outcomes := NewOutcomes()
	store := idem.NewStore(pool, idem.WithObserver(outcomes.Observe))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(outcomes, NewStoreCollector(store, 0))

	p := &idem.Policy{Operation: "createThing", KeyRequired: true}
	ok := func(ctx context.Context, tx idem.Tx) (*idem.Response, error) {
		return &idem.Response{Status: http.StatusCreated, Body: []byte("{}")}, nil
	}
	key := "k1"
	for range 2 {
		if _, err := store.Do(ctx, p, &key, nil, ok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Do(ctx, p, nil, nil, ok); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP idem_outcomes_total Idempotency protocol outcomes and events, by operation.
# TYPE idem_outcomes_total counter
idem_outcomes_total{operation="createThing",outcome="claimed"} 1
idem_outcomes_total{operation="createThing",outcome="completed"} 1
idem_outcomes_total{operation="createThing",outcome="missing_key"} 1
idem_outcomes_total{operation="createThing",outcome="replayed"} 1
# HELP idem_stale_claims Idempotency claims held now for longer than their lease (from pg_locks and pg_stat_activity, database-wide).
# TYPE idem_stale_claims gauge
idem_stale_claims 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idem_outcomes_total", "idem_stale_claims"); err != nil {
		t.Fatal(err)
	}
}

// The purge metrics follow the passes of a real Purger: rows deleted, passes caught up,
// the cutoff of the last one.
func TestPurgeMetrics(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, expires_at)
SELECT '', 'k' || i, 'op', '\x00', 'completed', now() - interval '1 minute' FROM generate_series(1, 5) AS i`); err != nil {
		t.Fatal(err)
	}
	m := NewPurgeMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	purger := idem.NewPurger(idem.NewStore(pool), 0, 2, nil)
	var last idem.PurgeResult
	for range 2 {
		last = purger.Once(ctx)
		m.Report(last)
	}
	m.Report(idem.PurgeResult{Err: context.Canceled})
	want := `
# HELP idem_purge_deleted_rows_total Expired idempotency keys deleted by the purger.
# TYPE idem_purge_deleted_rows_total counter
idem_purge_deleted_rows_total 5
# HELP idem_purge_passes_total Purge passes, by result: caught_up (every key expired when the pass began is deleted) or failed.
# TYPE idem_purge_passes_total counter
idem_purge_passes_total{result="caught_up"} 2
idem_purge_passes_total{result="failed"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idem_purge_deleted_rows_total", "idem_purge_passes_total"); err != nil {
		t.Fatal(err)
	}
	if got, want := testutil.ToFloat64(m.caughtUp), float64(last.Cutoff.UnixMicro())/1e6; got != want || want == 0 {
		t.Fatalf("caught-up timestamp %v, want the last pass's cutoff %v", got, want)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 7 {
		t.Fatalf("%d metrics, %v; want 7", n, err)
	}
}
