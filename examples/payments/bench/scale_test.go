package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/service"
)

var (
	scaleRows   = flag.Int("scale.rows", 10_000_000, "BenchmarkScale: rows bulk-loaded into the large key table")
	scaleSmall  = flag.Int("scale.small", 10_000, "BenchmarkScale: rows of the small key table it is compared with")
	scaleRounds = flag.Int("scale.rounds", 3, "BenchmarkScale: interleaved rounds per table")
	scaleRound  = flag.Duration("scale.round", 20*time.Second, "BenchmarkScale: length of one table's run in a round")
)

// scaleScopes is the number of accounts (the key table's scopes) of the loaded rows and of
// the requests.
const scaleScopes = 10_000

// loadKeys bulk-loads rows realistic key rows into pool's idempotency_keys with
// generate_series (36-character random keys in scaleScopes accounts, ~175-byte bodies,
// 24 h of retention), expiring evenly over the next expiry (24 h: created over the last
// 24 h, the oldest expiring now), the indexes built after the load, then VACUUM ANALYZE.
// ~9 minutes for 10M rows on 2 shared cores.
func loadKeys(b *testing.B, pool *pgxpool.Pool, rows int, expiry time.Duration) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	for _, q := range []string{
		`ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey`,
		`DROP INDEX idempotency_keys_expires_at_idx`,
		`DROP INDEX idempotency_keys_created_at_idx`,
		fmt.Sprintf(`INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, response_status,
                              response_headers, response_body, created_at, completed_at, expires_at, leased_until)
SELECT 'acct-' || (hashint4(i) & 16383) %% %d, gen_random_uuid()::text, 'createPayment', sha256(int4send(i)), 'completed', 201,
       jsonb_build_array(jsonb_build_array('Content-Type', 'application/json'),
                         jsonb_build_array('Location', '/payments/pay_' || md5(i::text))),
       convert_to(format('{"id":"pay_%%s","amount":%%s,"currency":"EUR","status":"succeeded","description":"order %%s","customer":"cus_%%s"}',
                         md5(i::text), i %% 100000, i, substr(md5((i * 7)::text), 1, 24)), 'UTF8'),
       t, t, t + interval '24 hours', t
FROM generate_series(1, %d) AS i,
     LATERAL (SELECT now() - interval '24 hours' + i * %g * interval '1 second') AS c(t)`, scaleScopes, rows, expiry.Seconds()/float64(rows)),
		`ALTER TABLE idempotency_keys ADD PRIMARY KEY (scope, key)`,
		`CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at)`,
		`CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys USING brin (created_at)`,
		`VACUUM ANALYZE idempotency_keys`,
	} {
		if _, err := pool.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			b.Fatalf("loading %d rows: %v", rows, err)
		}
	}
	fmt.Printf("loaded %d key rows in %v\n", rows, time.Since(start).Round(time.Second))
}

// tableBytes is the heap and index bytes per row of pool's idempotency_keys.
func tableBytes(b *testing.B, pool *pgxpool.Pool) (rows int64, heap, pk, expires float64) {
	b.Helper()
	var h, p, e int64
	err := pool.QueryRow(context.Background(), `SELECT count(*), pg_relation_size('idempotency_keys'),
       pg_relation_size('idempotency_keys_pkey'), pg_relation_size('idempotency_keys_expires_at_idx') FROM idempotency_keys`).Scan(&rows, &h, &p, &e)
	if err != nil {
		b.Fatal(err)
	}
	return rows, float64(h) / float64(rows), float64(p) / float64(rows), float64(e) / float64(rows)
}

// wal reads the cluster's WAL position and full-page images so far.
func wal(b *testing.B, pool *pgxpool.Pool) (bytes, fpi int64) {
	b.Helper()
	err := pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, wal_fpi FROM pg_stat_wal`).Scan(&bytes, &fpi)
	if err != nil {
		b.Fatal(err)
	}
	return bytes, fpi
}

// randomKey is a random UUID-shaped key, as clients mint them.
func randomKey() string {
	var u [16]byte
	rand.Read(u[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// randomAccount is one of the scaleScopes accounts.
func randomAccount() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(scaleScopes))
	return fmt.Sprintf("acct-%d", n.Int64())
}

// postKey sends POST /payments for account with key and returns its status and latency.
func postKey(url, account, key string) (int, time.Duration, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(service.AccountHeader, account)
	req.Header.Set("Idempotency-Key", key)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), err
}

// scaleRun is one table's run: requests, latencies, WAL bytes and full-page images.
type scaleRun struct {
	n        int
	elapsed  time.Duration
	lat      []time.Duration
	walBytes int64
	fpi      int64
}

// randomLoop runs c clients for d against url, each request with a random key in a random
// account (the key's leaf of the primary key is random, as with real clients), after a
// CHECKPOINT: the run pays the full-page images of the first change to each page.
func randomLoop(b *testing.B, pool *pgxpool.Pool, url string, c int, d time.Duration) scaleRun {
	return randomLoopAt(b, pool, url, c, d, 0)
}

// randomLoopAt is randomLoop at most rate requests per second (see randomKeysAt).
func randomLoopAt(b *testing.B, pool *pgxpool.Pool, url string, c int, d time.Duration, rate float64) scaleRun {
	b.Helper()
	if _, err := pool.Exec(context.Background(), "CHECKPOINT"); err != nil {
		b.Fatal(err)
	}
	w0, f0 := wal(b, pool)
	r := randomKeysAt(b, url, c, d, rate)
	w1, f1 := wal(b, pool)
	r.walBytes, r.fpi = w1-w0, f1-f0
	return r
}

// randomKeys runs c clients for d against url, each request with a random key in a random
// account, and returns the requests and their latencies (no WAL).
func randomKeys(b *testing.B, url string, c int, d time.Duration) scaleRun {
	return randomKeysAt(b, url, c, d, 0)
}

// randomKeysAt is randomKeys at most rate requests per second in all (a time.Ticker's
// ticks, taken by whichever client is free: ticks missed while all c are busy are
// dropped), or as fast as the c clients go when rate is 0.
func randomKeysAt(b *testing.B, url string, c int, d time.Duration, rate float64) scaleRun {
	b.Helper()
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		tick = t.C
	}
	lats := make([][]time.Duration, c)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c {
		wg.Go(func() {
			for time.Since(start) < d {
				if tick != nil {
					<-tick
				}
				status, lat, err := postKey(url, randomAccount(), randomKey())
				if err != nil || status != http.StatusCreated {
					b.Errorf("%s: status %d, %v", url, status, err)
					return
				}
				lats[i] = append(lats[i], lat)
			}
		})
	}
	wg.Wait()
	r := scaleRun{elapsed: time.Since(start), lat: slices.Concat(lats...)}
	r.n = len(r.lat)
	return r
}

// BenchmarkScale measures what the key table's size costs a request: the generated
// handler (POST /payments) at c=16 against a key table bulk-loaded to -scale.rows rows
// and against one of -scale.small rows, in interleaved rounds, each after a CHECKPOINT;
// random keys in 10,000 accounts. It reports per table the medians of req/s, p50, p99,
// WAL bytes and full-page images per request, and the large table's bytes per row.
// Heavy (the load of 10M rows takes ~9 minutes and ~6 GB); not run by default:
//
//	go -C examples test ./payments/bench -run '^$' -bench Scale -benchtime 1x -timeout 2h
//	go -C examples test ./payments/bench -run '^$' -bench Scale -benchtime 1x -scale.rows 1000000 \
//		-settings wal_compression=lz4,max_wal_size=20GB
func BenchmarkScale(b *testing.B) {
	small := database(b)
	loadKeys(b, small, *scaleSmall, 24*time.Hour)
	large := database(b)
	loadKeys(b, large, *scaleRows, 24*time.Hour)
	rows, heap, pk, exp := tableBytes(b, large)
	fmt.Printf("large table: %d rows, heap %.0f B/row, primary key %.0f B/row, expires_at %.0f B/row\n", rows, heap, pk, exp)

	tables := []struct {
		name string
		pool *pgxpool.Pool
		url  string
	}{{fmt.Sprintf("%d rows", *scaleSmall), small, ""}, {fmt.Sprintf("%d rows", *scaleRows), large, ""}}
	logf := func(format string, args ...any) { b.Errorf(format, args...) }
	for i := range tables {
		srv := httptest.NewServer(service.New(tables[i].pool, service.Options{Logf: logf}))
		b.Cleanup(srv.Close)
		tables[i].url = srv.URL + "/payments"
		randomLoop(b, tables[i].pool, tables[i].url, 16, 2*time.Second) // warm up
	}
	type stats struct{ rate, p50, p99, walReq, fpiReq []float64 }
	per := make([]stats, len(tables))
	for round := range *scaleRounds {
		for j := range tables {
			i := (round + j) % len(tables)
			r := randomLoop(b, tables[i].pool, tables[i].url, 16, *scaleRound)
			s := &per[i]
			s.rate = append(s.rate, float64(r.n)/r.elapsed.Seconds())
			s.p50 = append(s.p50, ms(percentile(r.lat, 0.50)))
			s.p99 = append(s.p99, ms(percentile(r.lat, 0.99)))
			s.walReq = append(s.walReq, float64(r.walBytes)/float64(r.n))
			s.fpiReq = append(s.fpiReq, float64(r.fpi)/float64(r.n))
		}
	}
	fmt.Printf("\nc=16, %s of %v, each after a CHECKPOINT, medians\n", plural(*scaleRounds, "round"), *scaleRound)
	fmt.Printf("%-16s %8s %7s %7s %10s %8s\n", "key table", "req/s", "p50 ms", "p99 ms", "WAL B/req", "FPI/req")
	for i, t := range tables {
		s := per[i]
		fmt.Printf("%-16s %8.0f %7.2f %7.2f %10.0f %8.3f\n", t.name, median(s.rate), median(s.p50), median(s.p99), median(s.walReq), median(s.fpiReq))
	}
	fmt.Printf("large/small: WAL per request %.2f×, req/s %.2f×, p99 %.2f×\n",
		median(per[1].walReq)/median(per[0].walReq), median(per[1].rate)/median(per[0].rate), median(per[1].p99)/median(per[0].p99))
	b.ReportMetric(median(per[1].walReq)/median(per[0].walReq), "WAL-large/small")
	b.ReportMetric(median(per[1].walReq), "WAL-B/req-large")
	b.ReportMetric(median(per[1].fpiReq), "FPI/req-large")
}
