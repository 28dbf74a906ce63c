// Package bench measures what idempotency costs over HTTP: the payments example's POST
// /payments as idemgen generated it (examples/payments/service) against a bare net/http
// handler that does the same business transaction (BEGIN; INSERT one payment; COMMIT)
// and answers the same JSON, in the same run, on a durable PostgreSQL (fsync and
// synchronous_commit on, a throwaway cluster from the local binaries).
//
// It holds benchmarks only: `go test ./examples/payments/bench` starts no server and runs
// nothing. Run them with
//
//	go test ./examples/payments/bench -run '^$' -bench . -benchtime 1x
//
// BenchmarkHTTP drives each variant closed-loop (c clients, each sending its next request
// when the last one is answered, a fresh idempotency key every time) at c=1 and c=16, in
// interleaved rounds (-rounds, -round), and reports per variant the medians over rounds
// of req/s, p50 and p99 latency, WAL syncs and commits per request, and the ratio to the
// bare handler. BenchmarkBurst releases 50 requests together (-bursts times): 50
// duplicates of one key against 50 distinct keys, with and without a claim pool.
// Results are printed as a table too; the README's performance notes quote them.
package bench
