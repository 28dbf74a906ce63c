package idem

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
	"github.com/idemgen/idemgen/internal/pgembed"
)

// BenchmarkBusinessTx measures one business transaction (insert one row, commit) with and
// without the protocol, at 1 and 16 goroutines, on the test cluster (fsync off: this is
// the protocol's CPU and round-trip cost, not its commit cost; for that see
// examples/payments/bench). Compare with benchstat; the ratio protocol/plain is the cost of
// idempotency (claim, lock, complete: three more statements, no more round trips).
func BenchmarkBusinessTx(b *testing.B) {
	for _, par := range []int{1, 16} {
		e := newEnv(b)
		p := policy("createThing")
		var seq atomic.Int64
		b.Run(fmt.Sprintf("plain/goroutines=%d", par), func(b *testing.B) {
			runParallel(b, par, func() {
				tx, err := e.pool.Begin(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := insertOne("x")(context.Background(), tx); err != nil {
					b.Error(err)
					return
				}
				if err := tx.Commit(context.Background()); err != nil {
					b.Error(err)
					return
				}
			})
		})
		b.Run(fmt.Sprintf("idempotent/goroutines=%d", par), func(b *testing.B) {
			runParallel(b, par, func() {
				key := fmt.Sprintf("bench-%d", seq.Add(1))
				r, err := e.store.Do(context.Background(), p, &key, parts("x"), insertOne("x"))
				if err != nil || r.Outcome != OutcomeCompleted {
					b.Error(r, err)
					return
				}
			})
		})
	}
}

// runParallel runs f b.N times in total on exactly par goroutines.
func runParallel(b *testing.B, par int, f func()) {
	var next atomic.Int64
	done := make(chan struct{})
	for range par {
		go func() {
			defer func() { done <- struct{}{} }()
			for next.Add(1) <= int64(b.N) {
				f()
			}
		}()
	}
	for range par {
		<-done
	}
}

var (
	claimRows = flag.String("claim.rows", "10000,100000,1000000",
		"BenchmarkClaimLatency: table sizes (rows in idempotency_keys) to measure at, ascending, comma-separated")
	claimSettings = flag.String("claim.settings", "",
		"BenchmarkClaimLatency: server settings of its cluster, comma-separated name=value (e.g. shared_buffers=1GB)")
	claimSetup = flag.String("claim.setup", "",
		"BenchmarkClaimLatency: SQL run once the table exists, e.g. to try another index set")
)

// BenchmarkClaimLatency measures the claim statement (ClaimKey, one round trip, a random
// UUID key as clients send them) as idempotency_keys grows, on a durable cluster of its
// own (-claim.settings adds server settings): it fills the table to each size of
// -claim.rows (completed rows of 500 scopes, spread over a day, with a response), vacuums
// it as autovacuum would, then times 3000 claims one after the other (after 3000 untimed
// ones). It reports per size p50, p99 and mean, p50 over the first size's, the table's
// and its indexes' sizes, and the blocks the claims (timed and untimed) read from outside
// shared buffers, per claim. Run it alone, e.g.
//
//	go test ./idem -run '^$' -bench ClaimLatency -benchtime 1x -timeout 1h \
//	  -claim.rows 10000,1000000,10000000 -claim.settings shared_buffers=1GB
//
// (10M rows take several minutes to load and about 5 GB of disk.)
func BenchmarkClaimLatency(b *testing.B) {
	var sizes []int
	for _, s := range strings.Split(*claimRows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			b.Fatalf("-claim.rows: %v", err)
		}
		sizes = append(sizes, n)
	}
	settings := map[string]string{}
	for _, kv := range strings.Split(*claimSettings, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	c, err := pgembed.Start(context.Background(), pgembed.Options{Durable: true, Settings: settings})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	e := newEnvOn(b, c.URL())
	if *claimSetup != "" {
		if _, err := e.pool.Exec(context.Background(), *claimSetup, pgx.QueryExecModeSimpleProtocol); err != nil {
			b.Fatalf("-claim.setup: %v", err)
		}
	}
	fp, _ := Fingerprint("createThing", parts("x")...)
	var first time.Duration
	fmt.Printf("\n%12s %9s %9s %9s %9s %11s %11s %10s\n", "rows", "p50 µs", "p99 µs", "mean µs", "p50/first",
		"table MB", "indexes MB", "reads/claim")
	for _, size := range sizes {
		start := time.Now()
		fillKeys(b, e.pool, size)
		b.Logf("filled to %d rows in %v", size, time.Since(start).Round(time.Second))
		readsBefore := blocksRead(b, e.pool)
		lat := timeClaims(b, e.pool, fp, 3000)
		reads := float64(blocksRead(b, e.pool)-readsBefore) / float64(2*len(lat))
		var tableMB, indexMB float64
		if err := e.pool.QueryRow(context.Background(), `SELECT pg_relation_size('idempotency_keys') / 1e6,
			pg_indexes_size('idempotency_keys') / 1e6`).Scan(&tableMB, &indexMB); err != nil {
			b.Fatal(err)
		}
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		mean := sum / time.Duration(len(lat))
		if first == 0 {
			first = p50
		}
		ratio := float64(p50) / float64(first)
		fmt.Printf("%12d %9.0f %9.0f %9.0f %9.2f %11.0f %11.0f %10.2f\n", size, us(p50), us(p99), us(mean), ratio,
			tableMB, indexMB, reads)
		b.ReportMetric(us(p50), fmt.Sprintf("p50-µs@%d", size))
		b.ReportMetric(ratio, fmt.Sprintf("p50-ratio@%d", size))
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// fillKeys grows idempotency_keys to size rows, in transactions of a million, then
// vacuums and analyzes it and writes the load's dirty pages out (CHECKPOINT), so that
// the timing sees the table, not the load.
func fillKeys(b *testing.B, pool *pgxpool.Pool, size int) {
	b.Helper()
	ctx := context.Background()
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys").Scan(&rows); err != nil {
		b.Fatal(err)
	}
	for from := rows; from < size; from += 1_000_000 {
		to := min(size, from+1_000_000)
		if _, err := pool.Exec(ctx, `
			INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status,
				response_status, response_headers, response_body, created_at, completed_at, expires_at)
			SELECT 'acct-' || (i % 500), gen_random_uuid()::text, 'createThing',
				sha256(i::text::bytea), 'completed',
				201, '[["Content-Type","application/json"],["Location","/things/1"]]',
				convert_to(repeat('{"id":"pay_0123456789abcdef","amount":1234}', 4), 'UTF8'), t, t, t + interval '1 day'
			FROM generate_series($1::bigint, $2::bigint - 1) AS i,
				LATERAL (SELECT now() - (i % 86400) * interval '1 second') AS c(t)`, from, to); err != nil {
			b.Fatal(err)
		}
	}
	for _, sql := range []string{"VACUUM ANALYZE idempotency_keys", "CHECKPOINT"} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
}

// blocksRead is how many blocks of idempotency_keys and its indexes were read from
// outside shared buffers so far (after the backends have reported their statistics).
func blocksRead(b *testing.B, pool *pgxpool.Pool) int64 {
	b.Helper()
	time.Sleep(1500 * time.Millisecond)
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT heap_blks_read + idx_blks_read
		FROM pg_statio_user_tables WHERE relname = 'idempotency_keys'`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// timeClaims times n claims of new random keys, one after the other, sorted, after as
// many untimed ones (a warm connection, warm caches).
func timeClaims(b *testing.B, pool *pgxpool.Pool, fp []byte, n int) []time.Duration {
	b.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	var keys []string
	if err := conn.QueryRow(ctx, `SELECT array_agg(gen_random_uuid()::text) FROM generate_series(1, $1)`, 2*n).Scan(&keys); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, 2*n)
	for i, key := range keys {
		hi, lo := lockHalves(LockID("acct-"+strconv.Itoa(i%500), key))
		st := idemdb.LockKeyParams{LockHi: hi, LockLo: lo, Scope: "acct-" + strconv.Itoa(i%500), Key: key}.Statement()
		start := time.Now()
		var locked, present bool
		var isolation string
		if err := conn.QueryRow(ctx, st.SQL, st.Args...).Scan(&locked, &isolation, &present); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	lat = lat[n:]
	slices.Sort(lat)
	return lat
}
