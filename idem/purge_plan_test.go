package idem_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// Planning a purge statement reads (almost) nothing of the key table. With its bounds as
// constants, PostgreSQL estimates a range that falls in the first bucket of the
// expires_at histogram by looking up the index's actual minimum
// (get_actual_variable_range): a walk from the start of the index over the entries of the
// rows the pass's earlier batches deleted, visiting their heap pages (up to 100 in
// PostgreSQL 15), for each statement of every batch. At 10M rows the purge front stays in
// that bucket (1 % of the rows) for minutes after each ANALYZE; the walks took 6–19 ms,
// and a purge statement over 50 ms now and then. Here the histogram has 10 buckets
// (statistics target 10), so that the 5,000 expired rows ahead of 95,000 later ones sit
// in its first, as a 10M-row table's front does in its first 1 %.
func TestPurgePlanningReadsNoDeletedEntries(t *testing.T) {
	url := pgtest.NewDB(t)
	setup := pgtest.Pool(t, url)
	ctx := context.Background()
	if err := idem.Migrate(ctx, setup); err != nil {
		t.Fatal(err)
	}
	insertKeys(t, setup, 1, 5000, "interval '-1 hour' + i * interval '1 millisecond'")
	insertKeys(t, setup, 5001, 95000, "interval '1 hour' + i * interval '1 millisecond'")
	for _, q := range []string{"ALTER TABLE idempotency_keys ALTER expires_at SET STATISTICS 10", "VACUUM ANALYZE idempotency_keys"} {
		if _, err := setup.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	// Each purge statement is planned once more, just before it is sent, by EXPLAIN
	// (planning only) on another connection: the table as the statement finds it.
	planner := &planningReads{explain: pgtest.PoolWithMax(t, url, 1), t: t, seen: map[string]bool{}}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = planner
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if n, err := idem.NewStore(pool).Purge(ctx, 500); err != nil || n != 5000 {
		t.Fatalf("purge: %d rows, %v; want 5000", n, err)
	}
	planner.mu.Lock()
	defer planner.mu.Unlock()
	if planner.statements < 20 {
		t.Fatalf("%d purge statements planned; want at least 20 (10 batches of two)", planner.statements)
	}
	t.Logf("%d purge statements: planning read at most %d buffers (%s)", planner.statements, planner.most, planner.mostName)
	// The index's metapage and the like; with constant bounds, the walk over the earlier
	// batches' deleted entries read 8 buffers in the second batch and 73 in the tenth.
	if planner.most > 10 {
		t.Fatalf("planning %s read %d buffers: the planner walks the entries the purge deleted", planner.mostName, planner.most)
	}
}

// planningReads is a pgx tracer that plans each purge statement (PurgeBound*,
// PurgeExpired*) with EXPLAIN (BUFFERS) on explain (one connection) before it runs, and
// keeps the most shared buffers (hit and read) one planning took, each statement's first
// planning left out (it loads the connection's catalog caches).
type planningReads struct {
	explain *pgxpool.Pool
	t       *testing.T

	mu         sync.Mutex
	statements int
	seen       map[string]bool
	most       int
	mostName   string
}

func (p *planningReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	name, ok := strings.CutPrefix(d.SQL, "-- name: ")
	if !ok || !strings.HasPrefix(name, "Purge") || strings.HasPrefix(name, "PurgeCutoff") {
		return ctx
	}
	name, _, _ = strings.Cut(name, " ")
	var plan []struct {
		Planning struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Planning"`
	}
	var out []byte
	args := append([]any{pgx.QueryExecModeSimpleProtocol}, withoutMode(d.Args)...)
	if err := p.explain.QueryRow(ctx, "EXPLAIN (BUFFERS, FORMAT JSON) "+d.SQL, args...).Scan(&out); err != nil {
		p.t.Errorf("explain %s: %v", name, err)
		return ctx
	}
	if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
		p.t.Errorf("explain %s: %v: %s", name, err, out)
		return ctx
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statements++
	if !p.seen[name] { // the connection's first planning of it reads the catalog
		p.seen[name] = true
		return ctx
	}
	if n := plan[0].Planning.Hit + plan[0].Planning.Read; n > p.most {
		p.most, p.mostName = n, name
	}
	return ctx
}

func (p *planningReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// withoutMode is args without a leading pgx.QueryExecMode.
func withoutMode(args []any) []any {
	if len(args) > 0 {
		if _, ok := args[0].(pgx.QueryExecMode); ok {
			return args[1:]
		}
	}
	return args
}
