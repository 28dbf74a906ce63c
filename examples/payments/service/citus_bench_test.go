package service_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
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

// benchRounds is how many times BenchmarkCitusVsPostgres measures each database, in turn.
const benchRounds = 5

// BenchmarkCitusVsPostgres measures the example's throughput of fresh payments (POST
// /payments, each request its own key and account) on one PostgreSQL and on the Citus
// cluster IDEM_CITUS_URL names (distributed by citus.sql), in one run, with the same
// service, pool size and concurrency: b.N requests sent by the hammer, which checks
// them, to each in turn, benchRounds times (so that a noisy neighbour slows them alike).
// It reports the median requests per second of each, and the ratio of the Citus medians
// to PostgreSQL's (x-postgres). The PostgreSQL is a cluster of its own, durable like the
// Citus nodes are (fsync, synchronous_commit and full_page_writes on:
// pgembed.Options.Durable). Citus is entered through the coordinator, or through the
// workers in turn. Without IDEM_CITUS_URL only PostgreSQL is measured. Give the count:
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
	type target struct {
		name  string
		pools []*pgxpool.Pool // the requests enter through each in turn
	}
	targets := []target{{"postgres", []*pgxpool.Pool{plain}}}

	if os.Getenv(citustest.EnvURL) != "" {
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
		targets = append(targets, target{"citus-coordinator", []*pgxpool.Pool{coordinator}}, target{"citus-workers", workers})
	}

	rps := make([][]float64, len(targets))
	b.ResetTimer()
	for round := range benchRounds {
		for i, t := range targets {
			r := benchHammer(b, t.pools...)
			b.Logf("round %d: %s %.0f req/s", round, t.name, r)
			rps[i] = append(rps[i], r)
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	postgres := median(rps[0])
	for i, t := range targets {
		b.ReportMetric(median(rps[i]), t.name+"-req/s")
		if i > 0 {
			b.ReportMetric(median(rps[i])/postgres, t.name+"-x-postgres")
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
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

// benchHammer serves the example on pools (the requests sent to them in turn), sends it
// b.N fresh payments, benchConcurrency at a time, and returns the requests per second.
func benchHammer(b *testing.B, pools ...*pgxpool.Pool) float64 {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	var handlers []http.Handler
	for _, p := range pools {
		handlers = append(handlers, service.New(p, service.Options{Logf: b.Logf}))
	}
	var next atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[next.Add(1)%uint64(len(handlers))].ServeHTTP(w, r)
	}))
	defer srv.Close()
	b.StartTimer()
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
	return res.RequestsPerSecond
}
