// Package reliability holds the process-level fault and hostile-input tests of the
// payments example (only tests; see RELIABILITY.md at the repository root for what they
// prove and the numbers of the last run).
//
// The tests build the real server (../cmd/server) once per run, with one change: its
// generated handlers are regenerated from ../openapi.yaml with a short lease and timeout
// (see shortLease, shortTimeout), so lease expiry and timeouts take seconds, not the
// spec's 30s and 10s. The regenerated files replace the committed ones through
// `go build -overlay`; nothing on disk changes. They then run several server processes
// on one PostgreSQL database (a throwaway cluster, see internal/pgtest and
// internal/pgembed), kill them with SIGKILL, terminate their database connections,
// restart and crash PostgreSQL under load, put PgBouncer in between, and send them
// malformed requests, checking the database after each: exactly one payment per key,
// no 2xx without a committed row, no key left processing past its lease.
//
//	go -C examples test ./payments/reliability -v
package reliability
