package bench

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
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
	steadyDuration = flag.Duration("steady.duration", 30*time.Minute, "BenchmarkSteady: length of the steady phase, the purger on throughout")
	sampleEvery    = flag.Duration("steady.sample", 3*time.Minute, "BenchmarkSteady: the steady phase's table is sampled this often")
	steadySegments = flag.Int("steady.segments", 6, "BenchmarkSteady: segments of the interleaved phase, purge on and off in turn (on, off, off, on, on, off, ...)")
	steadySegment  = flag.Duration("steady.segment", 2*time.Minute, "BenchmarkSteady: length of one interleaved segment")
	steadyInterval = flag.Duration("steady.interval", time.Minute, "BenchmarkSteady: the purger's interval")
	steadyBatch    = flag.Int("steady.batch", idem.DefaultPurgeBatchSize, "BenchmarkSteady: the purger's rows per batch")
	steadyRate     = flag.Float64("steady.rate", 0, "BenchmarkSteady: requests per second of the load in both phases, 0 for as fast as its 16 clients go (a saturated machine stalls every statement now and then)")
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
	start   time.Time
	passes  int
	deleted int64
	longest time.Duration
	batches int
	revisit int // batches of previous passes revisited
	slow    int // passes whose longest batch took over 50 ms
}

// report adds r, and prints it if its longest batch took over 50 ms: when (since the
// run's start), whether it swept from the start of the index, its batches and rows.
func (p *purgeStats) report(r idem.PurgeResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passes++
	p.deleted += r.Deleted
	p.batches += r.Batches
	p.revisit += r.Revisited
	p.longest = max(p.longest, r.LongestBatch)
	if r.LongestBatch > 50*time.Millisecond {
		p.slow++
		kind := "resumed"
		if r.From.IsZero() {
			kind = "sweep"
		}
		fmt.Printf("  slow purge pass at %v: %s, %d rows in %d batches (and %d revisited) over %v, longest batch %v, err %v\n",
			time.Since(p.start).Round(time.Second), kind, r.Deleted, r.Batches, r.Revisited, r.Duration.Round(time.Millisecond),
			r.LongestBatch.Round(time.Millisecond), r.Err)
	}
}

// BenchmarkSteady is the key table over a long steady run: the generated handler
// (POST /payments) at c=16 (as fast as they go, or -steady.rate requests per second in
// all) against a key table bulk-loaded to -steady.rows rows whose rows expire at
// -steady.expiry per second (about the rate of the inserts, so the table keeps its size),
// with idem's Purger (batch -steady.batch, interval -steady.interval). Two phases:
//
//   - steady: -steady.duration with the purger on throughout, the table sampled every
//     -steady.sample (req/s, p50, p99, the heap's size, dead tuples, autovacuum runs);
//     it reports the heap's growth from the first sample after an autovacuum to the end,
//     and its largest sample after that one;
//   - interleaved: -steady.segments segments of -steady.segment with the purger on and
//     off in turn (on, off, off, on, ...: the drift falls on both alike); it reports p99
//     with purge on against off, the medians of the segments.
//
// Then the longest purge batch (its bound and its DELETE, or a revisit of the previous
// pass's batch) and the passes with one over 50 ms (each printed when it ends: sweep or
// resumed), and WAL and full-page images per request over both phases (one CHECKPOINT at
// the start, the purge's and vacuum's WAL included) against two 10k-row tables' runs of
// -steady.small after a CHECKPOINT (smallBaseline): inserts alone, and inserts with
// day-old rows expiring and purged as the large table's are, the same work at a small
// size (the growth with the table alone). With log_min_duration_statement among the
// -settings, the purge statements the server logged are printed at the end. Heavy (the
// load of 10M rows takes ~3 minutes, the two 10k-row runs ~7, the steady run 42); not
// run by default. With the settings docs/sizing.md recommends:
//
//	go -C examples test ./payments/bench -run '^$' -bench Steady -benchtime 1x -timeout 3h -steady.expiry 2500 \
//		-settings wal_compression=lz4,checkpoint_timeout=30min,max_wal_size=20GB
//
// and at the 1,000 requests per second of the service the sizing page plans for, with
// the purge statements over 50 ms logged:
//
//	go -C examples test ./payments/bench -run '^$' -bench Steady -benchtime 1x -timeout 3h \
//		-steady.rate 1000 -steady.expiry 1000 \
//		-settings wal_compression=lz4,checkpoint_timeout=30min,max_wal_size=20GB,log_min_duration_statement=50
func BenchmarkSteady(b *testing.B) {
	// At the rate of the large table's run: full-page images per request fall as it rises.
	sm, _ := smallBaseline(b, false)
	smp, smpDeleted := smallBaseline(b, true)
	large := database(b)
	loadKeys(b, large, *steadyRows, time.Duration(float64(*steadyRows) / *steadyExpiry * float64(time.Second)))
	url := servePayments(b, large)
	randomKeys(b, url, 16, 5*time.Second) // warm up

	// The rows that expired during the load are purged and vacuumed first: the run starts
	// from a table in its steady state.
	stats := purgeStats{start: time.Now()}
	purger := idem.NewPurger(idem.NewStore(large), *steadyInterval, *steadyBatch, stats.report)
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
	stats.start = time.Now()
	requests := steadyPhase(b, large, url, purger)
	on, off, n := interleavedPhase(b, large, url, purger)
	requests += n
	w1, f1 := wal(b, large)

	fmt.Printf("\npurge: %d passes, %d rows deleted in %d batches (and %d revisited), longest batch %v, %d passes with a batch over 50 ms\n",
		stats.passes, stats.deleted, stats.batches, stats.revisit, stats.longest.Round(time.Millisecond), stats.slow)
	ratio := median(on) / median(off)
	fmt.Printf("p99 purge on / off: %.2f× (medians of %d and %d segments: %.2f ms, %.2f ms)\n", ratio, len(on), len(off), median(on), median(off))
	walReq, fpiReq := float64(w1-w0)/float64(requests), float64(f1-f0)/float64(requests)
	smallReq, purgedReq := float64(sm.walBytes)/float64(sm.n), float64(smp.walBytes)/float64(smp.n)
	fmt.Printf("WAL per request: %.0f B and %.3f full-page images over %d requests, %.2f rows deleted per request\n",
		walReq, fpiReq, requests, float64(stats.deleted)/float64(requests))
	fmt.Printf("  10k rows, inserts alone: %.0f B and %.3f over %d: %.2f×\n",
		smallReq, float64(sm.fpi)/float64(sm.n), sm.n, walReq/smallReq)
	fmt.Printf("  10k rows and the day-old rows expiring as the large table's do, purged: %.0f B and %.3f over %d, %.2f rows deleted per request: %.2f×\n",
		purgedReq, float64(smp.fpi)/float64(smp.n), smp.n, float64(smpDeleted)/float64(smp.n), walReq/purgedReq)
	printSlowStatements(b)
	b.ReportMetric(ratio, "p99-on/off")
	b.ReportMetric(walReq/smallReq, "WAL-large/small")
	b.ReportMetric(walReq/purgedReq, "WAL-large/small-purged")
	b.ReportMetric(float64(stats.longest.Microseconds())/1000, "longest-batch-ms")
}

// steadyPhase runs the load against url for -steady.duration with purger on throughout,
// printing the table every -steady.sample, and the heap's growth once an autovacuum has
// run; it returns the requests served.
func steadyPhase(b *testing.B, pool *pgxpool.Pool, url string, purger *idem.Purger) (requests int) {
	b.Helper()
	defer runPurger(purger)()
	first := sampleTable(b, pool)
	var samples []steadySample
	fmt.Printf("\nsteady phase: %v with the purger on\n", *steadyDuration)
	printSampleHeader("minute")
	for elapsed := time.Duration(0); elapsed < *steadyDuration; elapsed += *sampleEvery {
		r := randomKeysAt(b, url, 16, min(*sampleEvery, *steadyDuration-elapsed), *steadyRate)
		requests += r.n
		s := sampleTable(b, pool)
		samples = append(samples, s)
		printSample(fmt.Sprintf("%.0f", (elapsed+r.elapsed).Minutes()), r, s)
	}
	i := slices.IndexFunc(samples, func(s steadySample) bool { return s.autovacuums > first.autovacuums })
	if i < 0 {
		fmt.Printf("heap: no autovacuum ran on the key table in the steady phase\n")
		return requests
	}
	after, last := samples[i], samples[len(samples)-1]
	largest := slices.MaxFunc(samples[i:], func(x, y steadySample) int { return cmp.Compare(x.heap, y.heap) })
	fmt.Printf("heap: %.1f MB at the first sample after an autovacuum (%d of %d), %.1f MB at the end: %.3f× (largest %.3f×)\n",
		float64(after.heap)/1e6, i+1, len(samples), float64(last.heap)/1e6,
		float64(last.heap)/float64(after.heap), float64(largest.heap)/float64(after.heap))
	fmt.Printf("live rows: %d → %d (%.3f×); heap per live row %.0f → %.0f B\n", after.rows, last.rows,
		float64(last.rows)/float64(after.rows), float64(after.heap)/float64(after.rows), float64(last.heap)/float64(last.rows))
	b.ReportMetric(float64(last.heap)/float64(after.heap), "heap-end/after-autovacuum")
	return requests
}

// interleavedPhase runs -steady.segments segments of -steady.segment against url, the
// purger on and off in turn, and returns each one's p99 in ms and the requests served.
func interleavedPhase(b *testing.B, pool *pgxpool.Pool, url string, purger *idem.Purger) (on, off []float64, requests int) {
	b.Helper()
	fmt.Printf("\ninterleaved phase: %d segments of %v, the purger on and off in turn\n", *steadySegments, *steadySegment)
	printSampleHeader("segment, purge")
	for seg := range *steadySegments {
		purging := (seg+1)/2%2 == 0 // on, off, off, on, on, off, ...
		stop := func() {}
		if purging {
			stop = runPurger(purger)
		}
		r := randomKeysAt(b, url, 16, *steadySegment, *steadyRate)
		stop()
		requests += r.n
		p99 := ms(percentile(r.lat, 0.99))
		if purging {
			on = append(on, p99)
		} else {
			off = append(off, p99)
		}
		s := sampleTable(b, pool)
		printSample(fmt.Sprintf("%d, %v", seg+1, purging), r, s)
	}
	return on, off, requests
}

// printSampleHeader and printSample print a table of the load's runs (req/s, p50, p99)
// and the key table's samples after each, label first.
func printSampleHeader(label string) {
	fmt.Printf("%-14s %8s %7s %7s %9s %10s %7s %8s\n", label, "req/s", "p50 ms", "p99 ms", "heap MB", "dead", "autovac", "rows")
}

func printSample(label string, r scaleRun, s steadySample) {
	fmt.Printf("%-14s %8.0f %7.2f %7.2f %9.1f %10d %7d %8d\n", label, float64(r.n)/r.elapsed.Seconds(),
		ms(percentile(r.lat, 0.50)), ms(percentile(r.lat, 0.99)), float64(s.heap)/1e6, s.dead, s.autovacuums, s.rows)
}

// purgeStatement matches a server log line of a purge statement (its text begins with
// its sqlc name), not of another that names one (a look at pg_stat_statements).
var purgeStatement = regexp.MustCompile(`(statement|execute [^:]*): -- name: Purge`)

// printSlowStatements prints the purge statements (PurgeBound, PurgeExpired) that the
// server logged with their duration and bounds, when -settings set
// log_min_duration_statement.
func printSlowStatements(b *testing.B) {
	b.Helper()
	data, err := os.ReadFile(server.c.LogPath())
	if err != nil {
		b.Logf("server log: %v", err)
		return
	}
	var lines []string
	var bounds int // the logged statement's lines still to print: its WHERE clause
	for line := range strings.Lines(string(data)) {
		switch {
		case strings.Contains(line, "duration:") && purgeStatement.MatchString(line):
			lines, bounds = append(lines, strings.TrimSpace(line)), 3
		case bounds > 0 && strings.HasPrefix(line, "\t"):
			lines[len(lines)-1] += " " + strings.TrimSpace(line)
			bounds--
		default:
			bounds = 0
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Printf("\npurge statements in the server log (%d):\n", len(lines))
	for _, l := range lines[:min(len(lines), 40)] {
		fmt.Println("  " + l)
	}
}

// smallBaseline runs the load (c=16, -steady.rate) for -steady.small after a CHECKPOINT
// against a fresh table of 10k rows and returns its requests with the WAL they wrote.
// With purge, the table also holds the rows that expire at -steady.expiry during the run
// (bulk-loaded just before it, a day old, as the large table's are), and a Purger
// (-steady.interval, -steady.batch) deletes them; a last pass and a VACUUM after the load
// are counted too, so that the run writes the WAL of every row it expired. deleted is the
// rows the purger deleted.
func smallBaseline(b *testing.B, purge bool) (r scaleRun, deleted int64) {
	b.Helper()
	ctx := context.Background()
	pool := database(b)
	rows, expiry := 10_000, 24*time.Hour
	if purge {
		rows += int(*steadyExpiry * steadySmall.Seconds())
		expiry = time.Duration(float64(rows) / *steadyExpiry * float64(time.Second))
	}
	url := servePayments(b, pool)
	if !purge {
		loadKeys(b, pool, rows, expiry)
		randomKeys(b, url, 16, 5*time.Second) // warm up
		return randomLoopAt(b, pool, url, 16, *steadySmall, *steadyRate), 0
	}
	randomKeys(b, url, 16, 5*time.Second) // warm up, before the load: the rows' clock starts there
	loadKeys(b, pool, rows, expiry)
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		b.Fatal(err)
	}
	w0, f0 := wal(b, pool)
	stats := purgeStats{start: time.Now()}
	purger := idem.NewPurger(idem.NewStore(pool), *steadyInterval, *steadyBatch, stats.report)
	stop := runPurger(purger)
	r = randomKeysAt(b, url, 16, *steadySmall, *steadyRate)
	stop()
	last := purger.Once(ctx)
	if last.Err != nil {
		b.Fatal(last.Err)
	}
	if _, err := pool.Exec(ctx, "VACUUM idempotency_keys"); err != nil {
		b.Fatal(err)
	}
	w1, f1 := wal(b, pool)
	r.walBytes, r.fpi = w1-w0, f1-f0
	return r, stats.deleted + last.Deleted
}

// servePayments serves the payments example's handler on pool until the benchmark ends
// and returns its POST /payments URL; a 500's error fails the benchmark.
func servePayments(b *testing.B, pool *pgxpool.Pool) string {
	srv := httptest.NewServer(service.New(pool, service.Options{Logf: func(format string, args ...any) { b.Errorf(format, args...) }}))
	b.Cleanup(srv.Close)
	return srv.URL + "/payments"
}

// runPurger runs purger's loop until the returned stop is called; stop returns once the
// loop has ended.
func runPurger(purger *idem.Purger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { purger.Run(ctx) })
	return func() {
		cancel()
		running.Wait()
	}
}
