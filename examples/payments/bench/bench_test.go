package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/internal/pgembed"
)

var (
	rounds   = flag.Int("rounds", 5, "BenchmarkHTTP: interleaved rounds per concurrency (fewer than 3 gives no usable median)")
	roundDur = flag.Duration("round", 3*time.Second, "BenchmarkHTTP: length of one variant's run in a round")
	bursts   = flag.Int("bursts", 30, "BenchmarkBurst: bursts of 50 per variant")
	poolSize = flag.Int("pool", 16, "connections of the business pool (pgxpool MaxConns)")
	setupSQL = flag.String("setup", "", "SQL run after the tables are created, e.g. to try another index set")
	only     = flag.String("variants", "", "run only the variants whose names match this regexp besides bare (e.g. to profile one)")
	settings = flag.String("settings", "", "extra server settings, comma-separated name=value; a piece with no = continues the previous value (e.g. shared_buffers=1GB,shared_preload_libraries=auto_explain,pg_prewarm)")
	stmts    = flag.Bool("statements", false, "BenchmarkHTTP: load pg_stat_statements (beside -settings' shared_preload_libraries) and print each variant's statements per request (time, rows, WAL, blocks)")
)

// server is the durable throwaway cluster, started by the first benchmark that needs it.
var server struct {
	once sync.Once
	c    *pgembed.Cluster
	err  error
	seq  atomic.Int64

	dbURL string          // the database of the benchmark running now
	pools []*pgxpool.Pool // its pools, whose backends readCounters makes report statistics
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if server.c != nil {
		if err := server.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// database returns a pool (MaxConns -pool) on a new database of the durable cluster, with
// the service's tables.
func database(b *testing.B) (pool *pgxpool.Pool) {
	b.Helper()
	server.once.Do(func() {
		opts := pgembed.Options{Durable: true, Settings: map[string]string{}}
		opts.Settings = parseSettings(*settings)
		if *stmts {
			if libs := opts.Settings["shared_preload_libraries"]; libs != "" {
				opts.Settings["shared_preload_libraries"] = libs + ",pg_stat_statements"
			} else {
				opts.Settings["shared_preload_libraries"] = "pg_stat_statements"
			}
			opts.Settings["pg_stat_statements.track_planning"] = "on"
		}
		server.c, server.err = pgembed.Start(context.Background(), opts)
	})
	if server.err != nil {
		b.Fatal(server.err)
	}
	ctx := context.Background()
	name := fmt.Sprintf("bench_%d", server.seq.Add(1))
	admin, err := pgxpool.New(ctx, server.c.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	open := func(max int) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(server.c.DatabaseURL(name))
		if err != nil {
			b.Fatal(err)
		}
		cfg.MaxConns, cfg.MinConns = int32(max), int32(max)
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	pool = open(*poolSize)
	server.dbURL, server.pools = server.c.DatabaseURL(name), []*pgxpool.Pool{pool}
	if err := service.Setup(ctx, pool); err != nil {
		b.Fatal(err)
	}
	if *stmts {
		if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			b.Fatal(err)
		}
	}
	if *setupSQL != "" {
		if _, err := pool.Exec(ctx, *setupSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			b.Fatalf("-setup: %v", err)
		}
	}
	return pool
}

// parseSettings reads -settings: name=value pairs separated by commas, where a piece
// with no "=" continues the previous value (shared_preload_libraries=auto_explain,pg_prewarm).
func parseSettings(s string) map[string]string {
	out := map[string]string{}
	var last string
	for _, piece := range strings.Split(s, ",") {
		if name, value, ok := strings.Cut(piece, "="); ok {
			last = strings.TrimSpace(name)
			out[last] = strings.TrimSpace(value)
		} else if last != "" && strings.TrimSpace(piece) != "" {
			out[last] += "," + strings.TrimSpace(piece)
		}
	}
	return out
}

// variant is one HTTP server under test.
type variant struct {
	name string
	url  string
}

// serve starts the variants on loopback: the bare handler, the protocol's hand-written
// floor (floor_test.go), and the generated service.
func serve(b *testing.B, pool *pgxpool.Pool) []variant {
	b.Helper()
	logf := func(format string, args ...any) { b.Errorf(format, args...) }
	var out []variant
	for _, v := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", bareHandler(pool)},
		{"protocol-floor", handWritten(pool, func() txProtocol { return &protocolFloor{} })},
		{"idem", service.New(pool, service.Options{Logf: logf})},
	} {
		if *only != "" && v.name != "bare" && !regexp.MustCompile(*only).MatchString(v.name) {
			continue
		}
		srv := httptest.NewServer(v.h)
		b.Cleanup(srv.Close)
		out = append(out, variant{name: v.name, url: srv.URL + "/payments"})
	}
	return out
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 128}}

var body = []byte(`{"amount":1234,"currency":"EUR","description":"bench"}`)

// post sends one POST /payments with key and returns its status and latency; for a status
// other than 201, err carries the start of the answer's body (a problem's detail).
func post(url, key string) (int, time.Duration, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(service.AccountHeader, "acct-bench")
	req.Header.Set("Idempotency-Key", key)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	var got []byte
	if resp.StatusCode != http.StatusCreated {
		got, err = io.ReadAll(io.LimitReader(resp.Body, 300))
		if err == nil {
			err = fmt.Errorf("answered %q", got)
		}
	} else {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), err
}

var keySeq atomic.Int64

func newKey() string { return fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), keySeq.Add(1)) }

// counters are statistics read before and after a run: the server's WAL syncs and
// commits, and the CPU time of PostgreSQL's processes and of this one (HTTP clients and
// servers).
type counters struct {
	walSyncs, commits int64
	pings, own        int64 // transactions of readCounters itself (see there)
	pgCPU, goCPU      time.Duration
}

// readCounters reads the counters once every backend of the benchmark's database has
// written its statistics. A busy PostgreSQL 15 backend writes them at the end of a
// transaction at most once a second, an idle one only every 10 s: so readCounters waits
// a second after the load, then runs one transaction on every connection of the pools
// (pings: counted in this reading), and reads on a connection of its own (own: counted
// when it closes, in the next window). The wait also lets the WAL writer report.
func readCounters(b *testing.B) counters {
	b.Helper()
	ctx := context.Background()
	time.Sleep(1100 * time.Millisecond)
	var c counters
	for _, p := range server.pools {
		for _, conn := range p.AcquireAllIdle(ctx) {
			_, err := conn.Exec(ctx, "SELECT 1")
			conn.Release()
			if err != nil {
				b.Fatal(err)
			}
			c.pings++
		}
	}
	conn, err := pgx.Connect(ctx, server.dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	c.own = 1
	err = conn.QueryRow(ctx, `SELECT (SELECT wal_sync FROM pg_stat_wal),
		(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())`).Scan(&c.walSyncs, &c.commits)
	if err != nil {
		b.Fatal(err)
	}
	c.pgCPU = postgresCPU(b)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	c.goCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return c
}

// postgresCPU sums the user and system time of the cluster's postmaster and its
// children, living and exited (the postmaster's cutime and cstime), from /proc (clock
// ticks of 10 ms).
func postgresCPU(b *testing.B) time.Duration {
	b.Helper()
	pidFile, err := os.ReadFile(filepath.Join(server.c.DataDir(), "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	first, _, _ := strings.Cut(string(pidFile), "\n")
	postmaster := strings.TrimSpace(first)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		_, rest, _ := strings.Cut(string(data), ") ")
		f := strings.Fields(rest) // f[0] is field 3 (state); ppid is field 4, utime 14, stime 15
		if len(f) < 15 {
			continue
		}
		pid := strings.TrimSuffix(filepath.Base(filepath.Dir(path)), "/")
		if pid != postmaster && f[1] != postmaster {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
		if pid == postmaster { // and the backends that exited (readCounters closes them)
			cutime, _ := strconv.ParseInt(f[13], 10, 64)
			cstime, _ := strconv.ParseInt(f[14], 10, 64)
			ticks += cutime + cstime
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// run is one variant's closed-loop run.
type run struct {
	n                 int
	elapsed           time.Duration
	lat               []time.Duration
	walSyncs, commits float64 // per request
	pgCPU, goCPU      float64 // µs per request
}

func (r run) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// closedLoop runs c clients for d against url, each with a fresh key per request.
func closedLoop(b *testing.B, url string, c int, d time.Duration) run {
	b.Helper()
	before := readCounters(b)
	lats := make([][]time.Duration, c)
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c {
		wg.Go(func() {
			for time.Since(start) < d {
				status, lat, err := post(url, newKey())
				if err != nil || status != http.StatusCreated {
					if failed.Add(1) == 1 {
						b.Errorf("%s: status %d, %v", url, status, err)
					}
					continue
				}
				lats[i] = append(lats[i], lat)
			}
		})
	}
	wg.Wait()
	r := run{elapsed: time.Since(start), lat: slices.Concat(lats...)}
	r.n = len(r.lat)
	after := readCounters(b)
	r.walSyncs = float64(after.walSyncs-before.walSyncs) / float64(r.n)
	// minus readCounters' own transactions that fell in the window
	r.commits = float64(after.commits-before.commits-before.own-after.pings) / float64(r.n)
	r.pgCPU = float64((after.pgCPU - before.pgCPU).Microseconds()) / float64(r.n)
	r.goCPU = float64((after.goCPU - before.goCPU).Microseconds()) / float64(r.n)
	return r
}

// plural is "1 round", "5 rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkHTTP compares the generated handler with the bare one, closed-loop at c=1 and
// c=16, in interleaved rounds (the order rotates every round).
func BenchmarkHTTP(b *testing.B) {
	pool := database(b)
	vs := serve(b, pool)
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			// Warm up every variant: connections, statement caches, the table.
			for _, v := range vs {
				closedLoop(b, v.url, c, 500*time.Millisecond)
			}
			type stats struct{ rate, p50, p99, wal, commits, pgCPU, goCPU, ratio []float64 }
			per := make([]stats, len(vs))
			for round := range *rounds {
				rates := make([]float64, len(vs))
				for j := range vs {
					i := (round + j) % len(vs)
					r := closedLoop(b, vs[i].url, c, *roundDur)
					rates[i] = r.rate()
					s := &per[i]
					s.rate = append(s.rate, r.rate())
					s.p50 = append(s.p50, ms(percentile(r.lat, 0.50)))
					s.p99 = append(s.p99, ms(percentile(r.lat, 0.99)))
					s.wal = append(s.wal, r.walSyncs)
					s.commits = append(s.commits, r.commits)
					s.pgCPU = append(s.pgCPU, r.pgCPU)
					s.goCPU = append(s.goCPU, r.goCPU)
				}
				for i := range vs {
					per[i].ratio = append(per[i].ratio, rates[i]/rates[0])
				}
			}
			fmt.Printf("\nc=%d, %s of %v, medians (ratio: req/s over bare's, same round)\n", c, plural(*rounds, "round"), *roundDur)
			if *rounds < 3 || *roundDur < 3*time.Second {
				fmt.Println("warning: fewer than 3 rounds or rounds shorter than 3s: the ratios are noise on a shared machine")
			}
			fmt.Printf("%-16s %8s %6s %7s %7s %10s %9s %10s %10s\n", "variant", "req/s", "ratio", "p50 ms", "p99 ms",
				"WAL sync/r", "commits/r", "PG CPU/r", "Go CPU/r")
			for i, v := range vs {
				s := per[i]
				fmt.Printf("%-16s %8.0f %6.2f %7.2f %7.2f %10.2f %9.2f %8.0fµs %8.0fµs\n", v.name, median(s.rate), median(s.ratio),
					median(s.p50), median(s.p99), median(s.wal), median(s.commits), median(s.pgCPU), median(s.goCPU))
				b.ReportMetric(median(s.rate), v.name+"-req/s")
				if *stmts {
					defer printStatements(b, pool, v, c)
				}
				b.ReportMetric(median(s.p50), v.name+"-p50-ms")
				if i > 0 {
					b.ReportMetric(median(s.ratio), v.name+"/bare")
					b.ReportMetric(median(s.p50)/median(per[0].p50), v.name+"/bare-p50")
				}
			}
		})
	}
}

// BenchmarkBurst releases 50 requests together, over and over: 50 duplicates of one key
// (one execution, 49 answered 409 or replayed) against 50 distinct keys (50 executions),
// through the protocol floor and the generated handler (and the bare handler's 50
// distinct requests for reference). Latencies of all bursts are pooled per variant.
func BenchmarkBurst(b *testing.B) {
	const n = 50
	pool := database(b)
	vs := serve(b, pool)
	type kind struct {
		name string
		url  string
		dup  bool
	}
	var kinds []kind
	for _, v := range vs {
		kinds = append(kinds, kind{v.name + "/distinct", v.url, false})
		if v.name != "bare" {
			kinds = append(kinds, kind{v.name + "/duplicates", v.url, true})
		}
	}
	lats := make([][]time.Duration, len(kinds))
	statuses := make([]map[int]int, len(kinds))
	for i := range statuses {
		statuses[i] = map[int]int{}
	}
	for round := -2; round < *bursts; round++ { // two rounds of warm-up
		for j := range kinds {
			i := (max(round, 0) + j) % len(kinds)
			k := kinds[i]
			keys := make([]string, n)
			same := newKey()
			for x := range keys {
				keys[x] = same
				if !k.dup {
					keys[x] = newKey()
				}
			}
			got := make([]time.Duration, n)
			codes := make([]int, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for x := range n {
				wg.Go(func() {
					<-start
					var err error
					codes[x], got[x], err = post(k.url, keys[x])
					if err != nil && codes[x] == 0 { // a transport error; other answers are counted
						b.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
			if round < 0 {
				continue
			}
			lats[i] = append(lats[i], got...)
			for _, c := range codes {
				statuses[i][c]++
			}
		}
	}
	fmt.Printf("\n%d bursts of %d requests released together, all latencies pooled\n", *bursts, n)
	fmt.Printf("%-28s %8s %8s %8s  %s\n", "variant", "p50 ms", "p99 ms", "max ms", "answers")
	for i, k := range kinds {
		p50, p99, mx := percentile(lats[i], 0.5), percentile(lats[i], 0.99), percentile(lats[i], 1)
		fmt.Printf("%-28s %8.2f %8.2f %8.2f  %v\n", k.name, ms(p50), ms(p99), ms(mx), statuses[i])
		b.ReportMetric(ms(p99), strings.ReplaceAll(k.name, "/", "-")+"-p99-ms")
		for code := range statuses[i] {
			if code != http.StatusCreated && code != http.StatusConflict {
				b.Errorf("%s: %d answers with status %d", k.name, statuses[i][code], code)
			}
		}
	}
}

// printStatements runs v closed-loop once more (-round) and prints, from
// pg_stat_statements, the statements it ran per request: calls, mean execution and
// planning time (wall time: it includes waits for locks and WAL flushes), rows.
func printStatements(b *testing.B, pool *pgxpool.Pool, v variant, c int) {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		b.Fatal(err)
	}
	r := closedLoop(b, v.url, c, *roundDur)
	rows, err := pool.Query(ctx, `SELECT calls, total_exec_time, total_plan_time, rows, wal_records, wal_bytes,
		shared_blks_hit + shared_blks_read, shared_blks_dirtied, query
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND calls >= $1 ORDER BY total_exec_time DESC`, r.n/2)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	fmt.Printf("\n%s, c=%d: %d requests; per request:\n%6s %9s %9s %6s %6s %8s %6s %6s  %s\n", v.name, c, r.n,
		"calls", "exec µs", "plan µs", "rows", "WAL", "WAL B", "blocks", "dirt", "statement")
	for rows.Next() {
		var calls, nrows, walRecords, blocks, dirtied int64
		var exec, plan float64
		var walBytes pgtype.Numeric
		var query string
		if err := rows.Scan(&calls, &exec, &plan, &nrows, &walRecords, &walBytes, &blocks, &dirtied, &query); err != nil {
			b.Fatal(err)
		}
		n := float64(r.n)
		query = strings.Join(strings.Fields(query), " ")
		if len(query) > 70 {
			query = query[:70] + "..."
		}
		wb, _ := walBytes.Float64Value()
		fmt.Printf("%6.2f %9.1f %9.1f %6.2f %6.2f %8.0f %6.2f %6.2f  %s\n", float64(calls)/n, exec*1000/n, plan*1000/n,
			float64(nrows)/n, float64(walRecords)/n, wb.Float64/n, float64(blocks)/n, float64(dirtied)/n, query)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
}
