package service_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/internal/citustest"
	"github.com/idemgen/idemgen/internal/hammer"
	"github.com/idemgen/idemgen/internal/pgembed"
)

// benchConcurrency is the requests in flight, and each pool's size, in
// BenchmarkCitusVsPostgres.
const benchConcurrency = 16

// BenchmarkCitusVsPostgres measures the example's throughput of fresh payments (POST
// /payments, each request its own key and account) on one PostgreSQL and on the Citus
// cluster IDEM_CITUS_URL names (distributed by citus.sql), in one run, with the same
// service, pool size and concurrency: b.N requests sent by the hammer, which checks them.
// The PostgreSQL is a cluster of its own, durable like the Citus nodes are (fsync,
// synchronous_commit and full_page_writes on; pgembed.Options.Durable). The Citus
// sub-benchmarks enter through the coordinator, or through the workers in turn, and
// report their throughput against PostgreSQL's as x-postgres. Without IDEM_CITUS_URL
// only PostgreSQL is measured.
//
//	IDEM_CITUS_URL=... go test -run '^$' -bench CitusVsPostgres -benchtime 3000x ./payments/service/
func BenchmarkCitusVsPostgres(b *testing.B) {
	ctx := context.Background()
	pg, err := pgembed.Start(ctx, pgembed.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pg.Stop() })
	plain := benchPool(b, pg.URL(), false)
	if err := service.Setup(ctx, plain); err != nil {
		b.Fatal(err)
	}

	var postgresRPS float64
	b.Run("postgres", func(b *testing.B) {
		postgresRPS = benchHammer(b, plain)
	})

	if os.Getenv(citustest.EnvURL) == "" {
		return
	}
	cl := citustest.NewDB(b)
	coordinator := benchPool(b, cl.Coordinator, true)
	if err := service.Setup(ctx, coordinator); err != nil {
		b.Fatal(err)
	}
	if err := db.Distribute(ctx, coordinator); err != nil {
		b.Fatal(err)
	}
	var workers []*pgxpool.Pool
	for _, w := range cl.Workers {
		workers = append(workers, benchPool(b, w, true))
	}
	for _, entry := range []struct {
		name  string
		pools []*pgxpool.Pool
	}{
		{"citus-coordinator", []*pgxpool.Pool{coordinator}},
		{"citus-workers", workers},
	} {
		b.Run(entry.name, func(b *testing.B) {
			rps := benchHammer(b, entry.pools...)
			if postgresRPS > 0 {
				b.ReportMetric(rps/postgresRPS, "x-postgres")
			}
		})
	}
}

// benchPool is a pool of benchConcurrency connections on url; on a Citus node, its
// sessions log no remote commands (the test cluster's nodes log them by default).
func benchPool(b *testing.B, url string, citus bool) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = benchConcurrency
	cfg.ConnConfig.RuntimeParams["client_min_messages"] = "warning"
	if citus {
		cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// benchHammer serves the example on pools (the requests sent to them in turn) and sends
// it b.N fresh payments, benchConcurrency at a time; it reports and returns the
// requests per second.
func benchHammer(b *testing.B, pools ...*pgxpool.Pool) float64 {
	b.Helper()
	var handlers []http.Handler
	for _, p := range pools {
		handlers = append(handlers, service.New(p, service.Options{Logf: b.Logf}))
	}
	var next atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[next.Add(1)%uint64(len(handlers))].ServeHTTP(w, r)
	}))
	defer srv.Close()
	b.ResetTimer()
	res, err := hammer.Run(context.Background(), hammer.Config{
		URL:         srv.URL + "/payments",
		Header:      http.Header{service.AccountHeader: {"acct-{{i}}"}, "Content-Type": {"application/json"}},
		Body:        []byte(`{"amount":1999,"currency":"EUR","description":"order {{i}}"}`),
		Requests:    b.N,
		Keys:        b.N,
		Concurrency: benchConcurrency,
		Timeout:     time.Minute,
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if !res.OK() || res.Executions != b.N {
		b.Fatalf("%d executions of %d: %v", res.Executions, b.N, res.Problems())
	}
	b.ReportMetric(res.RequestsPerSecond, "req/s")
	return res.RequestsPerSecond
}
