// Package bench measures what idempotency costs over HTTP: the payments example's POST
// /payments as idemgen generated it (examples/payments/service) against a bare net/http
// handler that does the same business transaction (BEGIN; INSERT one payment; COMMIT)
// and answers the same JSON, in the same run, on a durable PostgreSQL (fsync and
// synchronous_commit on, a throwaway cluster from the local binaries).
//
// It holds benchmarks only: `go -C examples test ./payments/bench` starts no server and runs
// nothing. Run them with
//
//	go -C examples test ./payments/bench -run '^$' -bench . -benchtime 1x
//
// BenchmarkHTTP drives each variant closed-loop (c clients, each sending its next request
// when the last one is answered, a fresh idempotency key every time) at c=1 and c=16, in
// interleaved rounds (-rounds, -round), and reports per variant the medians over rounds
// of req/s, p50 and p99 latency, WAL syncs and commits per request, and the ratio to the
// bare handler. BenchmarkBurst releases 50 requests together (-bursts times): 50
// duplicates of one key against 50 distinct keys, through the floor and the generated
// service.
// Results are printed as a table too; docs/performance.md quotes them.
//
// Besides bare and the generated service, BenchmarkHTTP runs a hand-written floor
// (floor_test.go) with as little Go as possible around its SQL: protocol-floor sends the
// protocol's statements for a fresh key as idem does (BEGIN, the key's lock and its row
// read once the lock is held, in one flight; the business INSERT; the key's row born
// completed and COMMIT in one flight), and answers duplicates 409 or with the stored
// body. The gap from bare to
// protocol-floor is the cost of the protocol's SQL; from protocol-floor to idem, the cost
// of the generated code and the runtime. -statements prints, per variant, what
// pg_stat_statements saw per request (time, WAL records and bytes, buffers); -setup
// runs SQL after the tables are created (e.g. to try another index set) and -settings
// passes server settings.
//
// BenchmarkHandler (handler_test.go) calls the same three handlers in-process (no
// sockets, no client), one request at a time: the Go layer's own allocs/op and B/op, and,
// run for one variant (-variants), a CPU profile holding only that variant's server-side
// Go. profsplit splits such a profile per request into request decoding, validation,
// fingerprint, recorder, flights (pgx and the pipeline), GC and the scheduler:
//
//	go -C examples test ./payments/bench -run '^$' -bench 'Handler/idem$' -variants '^idem$' \
//		-benchtime 15000x -cpuprofile /tmp/idem.cpu -o /tmp/bench.test
//	go tool pprof -traces /tmp/bench.test /tmp/idem.cpu | go -C examples run ./payments/bench/profsplit -n 15050
//
// BenchmarkStarStores (stars_test.go) compares the two idempotency stores on the
// example's like-style operation (starPayment: one upsert of a counter), at c=16 in
// interleaved rounds, calling the stores directly: the key in the business transaction
// (idem.Store) against the key in Redis (idemredis.Store, a throwaway redis-server). It
// reports req/s, p50, p99, PostgreSQL's and redis-server's CPU per request, and the
// PostgreSQL CPU per request the Redis store saves:
//
//	go -C examples test ./payments/bench -run '^$' -bench StarStores -benchtime 1x
//
// BenchmarkScale (scale_test.go) measures what the key table's size costs a request (#28):
// the generated handler at c=16 against a key table bulk-loaded with generate_series to
// -scale.rows rows (default 10M: ~9 minutes and ~6 GB here) and against one of
// -scale.small rows, in interleaved rounds, each after a CHECKPOINT, with random keys in
// 10,000 accounts; it reports req/s, p50, p99, WAL bytes and full-page images per request,
// and the large table's bytes per row (docs/sizing.md quotes such numbers):
//
//	go -C examples test ./payments/bench -run '^$' -bench Scale -benchtime 1x -timeout 2h
package bench
