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
