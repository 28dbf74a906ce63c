package idem_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// The planner's estimate of a purge batch is not the batch's size: a batch near the top
// of the expires_at histogram's first bucket (after an ANALYZE, while the purge front
// moves through it) is estimated at up to the whole bucket, 1 % of the table. Here
// 200,000 rows, 5,000 expired, batches of 100: the estimates climb to ~2,000 rows as
// the front nears the bucket's end (at 10M rows, ~100k for a batch of 1,000, a cost over
// jit_above_cost; TestPurgeCompilesNothing). This pins the estimate the JIT guard is
// for: if it fails, PostgreSQL estimates these batches well now.
func TestPurgeBatchEstimateReachesTheBucket(t *testing.T) {
	url := pgtest.NewDB(t)
	setup := pgtest.Pool(t, url)
	ctx := context.Background()
	if err := idem.Migrate(ctx, setup); err != nil {
		t.Fatal(err)
	}
	insertKeys(t, setup, 1, 5000, "interval '-1 hour' + i * interval '1 millisecond'")
	insertKeys(t, setup, 5001, 195000, "interval '1 hour' + i * interval '1 millisecond'")
	if _, err := setup.Exec(ctx, "VACUUM ANALYZE idempotency_keys"); err != nil {
		t.Fatal(err)
	}

	// Each batch's DELETE is planned once more by EXPLAIN on another connection just
	// before it is sent: the estimate for the table as the statement finds it.
	est := &batchEstimates{explain: pgtest.PoolWithMax(t, url, 1), t: t}
	pool := tracedPool(t, url, est)
	if n, err := idem.NewStore(pool).Purge(ctx, 100); err != nil || n != 5000 {
		t.Fatalf("purge: %d rows, %v; want 5000", n, err)
	}
	est.mu.Lock()
	defer est.mu.Unlock()
	if len(est.rows) < 50 {
		t.Fatalf("%d batch deletes planned; want at least 50", len(est.rows))
	}
	t.Logf("%d batches of 100: the planner's estimates %d–%d rows", len(est.rows), slices.Min(est.rows), slices.Max(est.rows))
	if most := slices.Max(est.rows); most < 1000 {
		t.Fatalf("batches of 100 estimated at %d rows at most; want the first bucket's ~2,000 near its end", most)
	}
}

// No statement of a purge pass is JIT-compiled, whatever its estimate: in a database
// that compiles every statement (jit_above_cost = 0) and dumps each compiled module to
// the data directory (jit_dump_bitcode), a purge leaves no module, while one statement
// outside it does.
func TestPurgeCompilesNothing(t *testing.T) {
	url := pgtest.NewDB(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	// The database's own settings, from another database before any connection to this
	// one (behind PgBouncer, which refuses them as startup parameters, a server
	// connection opened earlier would keep the defaults).
	admin := pgtest.Pool(t, pgtest.URL(t))
	for _, set := range []string{"jit_above_cost = 0", "jit_dump_bitcode = on"} {
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" SET "+set); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close()
	setup := pgtest.Pool(t, url)
	var jit bool
	var dataDir string
	if err := setup.QueryRow(ctx, "SELECT pg_jit_available(), current_setting('data_directory')").Scan(&jit, &dataDir); err != nil {
		t.Fatal(err)
	}
	if !jit {
		t.Skip("this PostgreSQL has no JIT (llvmjit): nothing to compile")
	}
	if err := idem.Migrate(ctx, setup); err != nil {
		t.Fatal(err)
	}
	insertKeys(t, setup, 1, 2000, "interval '-1 hour' + i * interval '1 millisecond'")
	pool := pgtest.PoolWithMax(t, url, 1)
	modules := func() int {
		files, err := filepath.Glob(filepath.Join(dataDir, "*.bc"))
		if err != nil {
			t.Fatal(err)
		}
		return len(files)
	}

	before := modules()
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*)::int FROM idempotency_keys WHERE status = 'completed'").Scan(&n); err != nil || n != 2000 {
		t.Fatalf("count: %d, %v", n, err)
	}
	control := modules() - before
	if control == 0 {
		t.Fatal("a count on a JIT-everything connection left no module in the data directory: this test cannot see JIT")
	}

	before = modules()
	if n, err := idem.NewStore(pool).Purge(ctx, 500); err != nil || n != 2000 {
		t.Fatalf("purge: %d rows, %v; want 2000", n, err)
	}
	if got := modules() - before; got != 0 {
		t.Fatalf("a purge pass JIT-compiled %d modules (the count outside it: %d)", got, control)
	}
}

// tracedPool opens a pool of one connection on url with tracer, closed when the test
// ends.
func tracedPool(t *testing.T, url string, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// batchEstimates is a pgx tracer that plans each PurgeExpired with EXPLAIN on explain
// (one connection) before it is sent and keeps the rows the planner expects it to scan.
type batchEstimates struct {
	explain *pgxpool.Pool
	t       *testing.T

	mu   sync.Mutex
	rows []int
}

func (b *batchEstimates) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.HasPrefix(d.SQL, "-- name: PurgeExpired ") {
		return ctx
	}
	args := append([]any{pgx.QueryExecModeSimpleProtocol}, withoutMode(d.Args)...)
	var out []byte
	if err := b.explain.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+d.SQL, args...).Scan(&out); err != nil {
		b.t.Errorf("explain PurgeExpired: %v", err)
		return ctx
	}
	var plan []struct{ Plan planNode }
	if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
		b.t.Errorf("explain PurgeExpired: %v: %s", err, out)
		return ctx
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rows = append(b.rows, plan[0].Plan.mostRows())
	return ctx
}

func (b *batchEstimates) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan tree.
type planNode struct {
	Rows  int        `json:"Plan Rows"`
	Plans []planNode `json:"Plans"`
}

// mostRows is the largest row estimate in the tree under n.
func (n planNode) mostRows() int {
	most := n.Rows
	for _, c := range n.Plans {
		most = max(most, c.mostRows())
	}
	return most
}

// withoutMode is args without a leading pgx.QueryExecMode.
func withoutMode(args []any) []any {
	if len(args) > 0 {
		if _, ok := args[0].(pgx.QueryExecMode); ok {
			return args[1:]
		}
	}
	return args
}
