package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemredis"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
)

// starPayments is how many payments BenchmarkStarStores stars at random: enough that
// the clients rarely wait on one another's row lock.
const starPayments = 1000

// starPolicy is starPayment's policy in examples/payments (lease 5s, retention 1h),
// for both stores.
var starPolicy = idem.MustPolicy(idem.Policy{
	Operation: "starPayment", KeySource: "header Idempotency-Key", KeyRequired: true,
	Lease: 5 * time.Second, Retention: time.Hour,
})

// BenchmarkStarStores runs the like-style operation of examples/payments (starPayment: one
// upsert into payment_stars, a counter) under both stores, at c=16, in interleaved rounds
// (-rounds, -round) on one durable PostgreSQL and one redis-server: postgres, the key in
// the business transaction (idem.Store, as if the operation were marked store:
// postgres), against redis, the key in Redis and the upsert autocommitted
// (idemredis.Store, store: redis as the example has it). Each request has a fresh key and
// stars one of 1000 payments at random. The stores are called directly (Store.Do), without
// HTTP, which costs both the same. It reports per store the medians over rounds of req/s,
// p50 and p99, PostgreSQL's and redis-server's CPU per request, and commits and WAL syncs
// per request; then the PostgreSQL CPU per request that the Redis store saves.
func BenchmarkStarStores(b *testing.B) {
	const c = 16
	pool := database(b)
	ctx := context.Background()
	ids := make([]string, starPayments)
	for i := range ids {
		err := pool.QueryRow(ctx, `INSERT INTO payments (account_id, amount, currency, idempotency_scope, idempotency_key)
			VALUES ('acct_bench', 1999, 'EUR', 'acct_bench', $1) RETURNING id`, fmt.Sprintf("seed-%d", i)).Scan(&ids[i])
		if err != nil {
			b.Fatal(err)
		}
	}
	dir, err := os.MkdirTemp("", "bench-redis-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	rsrv, err := redistest.Launch(dir)
	if err != nil {
		b.Skipf("no redis-server: %v", err)
	}
	b.Cleanup(rsrv.Kill)
	rdb := redis.NewClient(&redis.Options{Addr: rsrv.Addr(), PoolSize: 2 * c, ContextTimeoutEnabled: true})
	b.Cleanup(func() { rdb.Close() })
	scope := func(context.Context) (string, error) { return "acct_bench", nil }
	rstore, err := idemredis.New(ctx, rdb, idemredis.WithScope(scope))
	if err != nil {
		b.Fatal(err)
	}
	pstore := idem.NewStore(pool, idem.WithScope(scope))

	star := func(ctx context.Context, q db.DBTX, id string) (*idem.Response, error) {
		row, err := db.New(q).StarPayment(ctx, db.StarPaymentParams{ID: id, AccountID: "acct_bench"})
		if err != nil {
			return nil, err
		}
		return &idem.Response{Status: 200, Header: []idem.HeaderLine{{Name: "Content-Type", Value: "application/json"}},
			Body: fmt.Appendf(nil, `{"payment_id":%q,"stars":%d}`+"\n", row.PaymentID, row.Stars)}, nil
	}
	variants := []struct {
		name string
		do   func(ctx context.Context, key, id string) (*idem.Response, error)
	}{
		{"postgres", func(ctx context.Context, key, id string) (*idem.Response, error) {
			return pstore.Do(ctx, starPolicy, &key, []idem.Part{{Name: "path id", Value: id}}, func(ctx context.Context, tx idem.Tx) (*idem.Response, error) {
				return star(ctx, tx, id)
			})
		}},
		{"redis", func(ctx context.Context, key, id string) (*idem.Response, error) {
			return rstore.Do(ctx, starPolicy, &key, []idem.Part{{Name: "path id", Value: id}}, func(ctx context.Context) (*idem.Response, error) {
				return star(ctx, pool, id)
			})
		}},
	}
	type stats struct{ rate, p50, p99, pgCPU, redisCPU, commits, wal []float64 }
	all := make([]stats, len(variants))
	for i := 0; i < b.N; i++ {
		for round := range *rounds {
			for v, vr := range variants {
				if round%2 == 1 { // alternate which store goes first
					v = len(variants) - 1 - v
					vr = variants[v]
				}
				r := starLoop(b, pool, rsrv.Pid(), c, *roundDur, ids, vr.do)
				s := &all[v]
				s.rate = append(s.rate, r.rate())
				s.p50 = append(s.p50, float64(percentile(r.lat, 0.50).Microseconds())/1000)
				s.p99 = append(s.p99, float64(percentile(r.lat, 0.99).Microseconds())/1000)
				s.pgCPU = append(s.pgCPU, r.pgCPU)
				s.redisCPU = append(s.redisCPU, r.redisCPU)
				s.commits = append(s.commits, r.commits)
				s.wal = append(s.wal, r.walSyncs)
			}
		}
	}
	fmt.Printf("\nBenchmarkStarStores: starPayment at c=%d, %d rounds of %s, medians\n", c, *rounds, *roundDur)
	fmt.Printf("%-9s %9s %9s %9s %11s %14s %10s %11s\n", "store", "req/s", "p50 ms", "p99 ms", "PG CPU/r", "Redis CPU/r", "commits/r", "WAL sync/r")
	for v, vr := range variants {
		s := all[v]
		fmt.Printf("%-9s %9.0f %9.2f %9.2f %9.0fµs %12.0fµs %10.2f %11.2f\n", vr.name, median(s.rate), median(s.p50), median(s.p99),
			median(s.pgCPU), median(s.redisCPU), median(s.commits), median(s.wal))
		b.ReportMetric(median(s.rate), vr.name+"-req/s")
		b.ReportMetric(median(s.pgCPU), vr.name+"-PG-µs/op")
	}
	pg, rd := all[0], all[1]
	fmt.Printf("redis/postgres: throughput %.2fx, p50 %.2fx; PostgreSQL CPU saved per request: %.0fµs (%.0f%%)\n",
		median(rd.rate)/median(pg.rate), median(rd.p50)/median(pg.p50),
		median(pg.pgCPU)-median(rd.pgCPU), 100*(1-median(rd.pgCPU)/median(pg.pgCPU)))
}

// starRun is one store's closed-loop run.
type starRun struct {
	run
	redisCPU float64 // µs per request
}

// starLoop runs c clients for d, each calling do with a fresh key and a random payment
// until d has passed.
func starLoop(b *testing.B, pool *pgxpool.Pool, redisPid, c int, d time.Duration, ids []string,
	do func(ctx context.Context, key, id string) (*idem.Response, error)) starRun {
	b.Helper()
	before, rBefore := readCounters(b), processCPU(redisPid)
	lats := make([][]time.Duration, c)
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c {
		wg.Go(func() {
			ctx := context.Background()
			for time.Since(start) < d {
				t0 := time.Now()
				resp, err := do(ctx, newKey(), ids[rand.IntN(len(ids))])
				if err != nil || resp.Status != 200 || resp.Outcome != idem.OutcomeCompleted {
					if failed.Add(1) == 1 {
						b.Errorf("star: %v %v", resp, err)
					}
					continue
				}
				lats[i] = append(lats[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, rAfter := readCounters(b), processCPU(redisPid)
	var r starRun
	r.lat = slices.Concat(lats...)
	r.n, r.elapsed = len(r.lat), elapsed
	n := float64(r.n)
	r.commits = float64(after.commits-before.commits-before.own-after.pings) / n // minus readCounters' own
	r.walSyncs = float64(after.walSyncs-before.walSyncs) / n
	r.pgCPU = float64((after.pgCPU - before.pgCPU).Microseconds()) / n
	r.redisCPU = float64((rAfter - rBefore).Microseconds()) / n
	return r
}

// processCPU is the user and system time of process pid, from /proc (10 ms ticks).
func processCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
