package bench

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem"
)

var (
	steadyRows     = flag.Int("steady.rows", 10_000_000, "BenchmarkSteady: rows bulk-loaded into the key table")
	steadyExpiry   = flag.Float64("steady.expiry", 1500, "BenchmarkSteady: loaded rows expiring per second (about the requests per second, for a table that stays its size)")
	steadySegments = flag.Int("steady.segments", 10, "BenchmarkSteady: segments, purge on and off in turn (on, off, off, on, on, off, ...)")
	steadySegment  = flag.Duration("steady.segment", 3*time.Minute, "BenchmarkSteady: length of one segment")
	steadyInterval = flag.Duration("steady.interval", time.Minute, "BenchmarkSteady: the purger's interval")
	steadySmall    = flag.Duration("steady.small", 3*time.Minute, "BenchmarkSteady: length of the 10k-row table's run its WAL per request is compared with")
)

// steadySample is the key table's state at the end of a segment.
type steadySample struct {
	heap, dead, rows, autovacuums int64
}

func sampleTable(b *testing.B, pool *pgxpool.Pool) (s steadySample) {
	b.Helper()
	err := pool.QueryRow(context.Background(), `SELECT pg_relation_size('idempotency_keys'), n_dead_tup, n_live_tup, autovacuum_count
FROM pg_stat_user_tables WHERE relname = 'idempotency_keys'`).Scan(&s.heap, &s.dead, &s.rows, &s.autovacuums)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// purgeStats collects a purger's passes.
type purgeStats struct {
	mu      sync.Mutex
	passes  int
	deleted int64
	longest time.Duration
	batches int
	slow    int // passes whose longest batch took over 50 ms
}

func (p *purgeStats) report(r idem.PurgeResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passes++
	p.deleted += r.Deleted
	p.batches += r.Batches
	p.longest = max(p.longest, r.LongestBatch)
	if r.LongestBatch > 50*time.Millisecond {
		p.slow++
	}
}

// BenchmarkSteady is the key table over a long steady run: the generated handler
// (POST /payments) at c=16 against a key table bulk-loaded to -steady.rows rows whose rows
// expire at -steady.expiry per second (about the rate of the inserts, so the table keeps
// its size), for -steady.segments segments of -steady.segment with idem's Purger (batch
// 1,000, interval -steady.interval) on and off in turn (on, off, off, on, ...: the drift
// falls on both alike). It reports per segment req/s, p50, p99, the heap's size, dead
// tuples and autovacuum runs; then p99 with purge on against off (medians of the
// segments), the heap's growth from the end of the first autovacuum to the end, the
// longest purge batch (its bound and its DELETE), and WAL and full-page images per
// request over the whole run (one CHECKPOINT at its start, the purge's and vacuum's WAL
// included) against a 10k-row table's run of -steady.small after a CHECKPOINT (inserts
// alone: the comparison is conservative). Heavy (the load of 10M rows takes ~9 minutes,
// the run 30); not run by default. With the settings docs/sizing.md recommends:
//
//	go -C examples test ./payments/bench -run '^$' -bench Steady -benchtime 1x -timeout 3h -steady.expiry 2500 \
//		-settings wal_compression=lz4,checkpoint_timeout=30min,max_wal_size=20GB
func BenchmarkSteady(b *testing.B) {
	small := database(b)
	loadKeys(b, small, 10_000, 24*time.Hour)
	large := database(b)
	loadKeys(b, large, *steadyRows, time.Duration(float64(*steadyRows) / *steadyExpiry * float64(time.Second)))
	logf := func(format string, args ...any) { b.Errorf(format, args...) }
	smallSrv := httptest.NewServer(service.New(small, service.Options{Logf: logf}))
	b.Cleanup(smallSrv.Close)
	largeSrv := httptest.NewServer(service.New(large, service.Options{Logf: logf}))
	b.Cleanup(largeSrv.Close)

	randomKeys(b, smallSrv.URL+"/payments", 16, 5*time.Second) // warm up
	sm := randomLoop(b, small, smallSrv.URL+"/payments", 16, *steadySmall)
	randomKeys(b, largeSrv.URL+"/payments", 16, 5*time.Second)

	// The rows that expired during the load are purged and vacuumed first: the run starts
	// from a table in its steady state.
	var stats purgeStats
	purger := idem.NewPurger(idem.NewStore(large), *steadyInterval, 1000, stats.report)
	if r := purger.Once(context.Background()); r.Err != nil {
		b.Fatal(r.Err)
	} else {
		fmt.Printf("purged the %d rows expired during the load in %v\n", r.Deleted, r.Duration.Round(time.Second))
	}
	for _, q := range []string{"VACUUM ANALYZE idempotency_keys", "CHECKPOINT"} {
		if _, err := large.Exec(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
	w0, f0 := wal(b, large)
	var on, off []float64
	var requests int
	var samples []steadySample
	fmt.Printf("\n%-8s %-5s %8s %7s %7s %9s %10s %6s %8s\n", "segment", "purge", "req/s", "p50 ms", "p99 ms", "heap MB", "dead", "autovac", "rows")
	for seg := range *steadySegments {
		purging := (seg+1)/2%2 == 0 // on, off, off, on, on, off, ...
		ctx, cancel := context.WithCancel(context.Background())
		var running sync.WaitGroup
		if purging {
			running.Go(func() { purger.Run(ctx) })
		}
		r := randomKeys(b, largeSrv.URL+"/payments", 16, *steadySegment)
		cancel()
		running.Wait()
		requests += r.n
		p99 := ms(percentile(r.lat, 0.99))
		if purging {
			on = append(on, p99)
		} else {
			off = append(off, p99)
		}
		s := sampleTable(b, large)
		samples = append(samples, s)
		fmt.Printf("%-8d %-5v %8.0f %7.2f %7.2f %9.1f %10d %6d %8d\n", seg+1, purging, float64(r.n)/r.elapsed.Seconds(),
			ms(percentile(r.lat, 0.50)), p99, float64(s.heap)/1e6, s.dead, s.autovacuums, s.rows)
	}
	w1, f1 := wal(b, large)

	fmt.Printf("\npurge: %d passes, %d rows deleted in %d batches, longest batch %v, %d passes with a batch over 50 ms\n",
		stats.passes, stats.deleted, stats.batches, stats.longest.Round(time.Millisecond), stats.slow)
	ratio := median(on) / median(off)
	fmt.Printf("p99 purge on / off: %.2f× (medians of %d and %d segments: %.2f ms, %.2f ms)\n", ratio, len(on), len(off), median(on), median(off))
	if i := slices.IndexFunc(samples, func(s steadySample) bool { return s.autovacuums > samples[0].autovacuums }); i >= 0 {
		last := samples[len(samples)-1]
		fmt.Printf("heap: %.1f MB after the first autovacuum (segment %d), %.1f MB at the end: %.3f×\n",
			float64(samples[i].heap)/1e6, i+1, float64(last.heap)/1e6, float64(last.heap)/float64(samples[i].heap))
	} else {
		fmt.Printf("heap: no autovacuum ran on the key table after the first segment\n")
	}
	walReq, fpiReq := float64(w1-w0)/float64(requests), float64(f1-f0)/float64(requests)
	smallReq := float64(sm.walBytes) / float64(sm.n)
	fmt.Printf("WAL per request: %.0f B and %.3f full-page images over %d requests; 10k rows: %.0f B and %.3f over %d: %.2f×\n",
		walReq, fpiReq, requests, smallReq, float64(sm.fpi)/float64(sm.n), sm.n, walReq/smallReq)
	b.ReportMetric(ratio, "p99-on/off")
	b.ReportMetric(walReq/smallReq, "WAL-large/small")
	b.ReportMetric(float64(stats.longest.Microseconds())/1000, "longest-batch-ms")
}
