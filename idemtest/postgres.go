package idemtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// Main runs the tests of m against a PostgreSQL server and exits with their exit code.
// Call it from TestMain, once per test binary:
//
//	func TestMain(m *testing.M) { idemtest.Main(m) }
//
// With DATABASE_URL set (postgres://user@host:port/db?sslmode=disable) the tests use that
// server: each test's database is created and dropped there. Otherwise Main starts a
// throwaway cluster for the binary from the local PostgreSQL server binaries (initdb and
// postgres on PATH or in /usr/lib/postgresql/*/bin; as root they run as the "postgres" OS
// user, which PostgreSQL requires), tuned for speed (fsync off), listening on 127.0.0.1
// only, and removes it when the tests end (also on SIGINT and SIGTERM; a killed binary's
// server dies with it). It takes about a second. Without either, Main prints how to
// install PostgreSQL and exits 1: tests are never skipped silently. -v logs the cluster's
// progress.
func Main(m *testing.M) {
	pgtest.Name = "idemtest"
	pgtest.Main(m)
}

// NewDB creates an empty database of the test's own and returns its URL. It is dropped
// (WITH (FORCE)) when the test and its subtests end, so tests and packages running in
// parallel against one server never share rows. It fails tb when Main was not called.
func NewDB(tb testing.TB) string {
	tb.Helper()
	if !pgtest.Started() {
		tb.Fatal("idemtest: no PostgreSQL server: call idemtest.Main(m) from TestMain (func TestMain(m *testing.M) { idemtest.Main(m) })")
	}
	return pgtest.NewDB(tb)
}

// Pool opens a pgx pool on url (pgx's default size, or pool_max_conns in url), checks it
// connects, and closes it when the test ends.
func Pool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	return pgtest.Pool(tb, url)
}

// PoolWithMax is Pool with at most maxConns connections (0: as Pool).
func PoolWithMax(tb testing.TB, url string, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	return pgtest.PoolWithMax(tb, url, maxConns)
}

// NewPool is NewDB and Pool, with idem's idempotency_keys table created (idem.Migrate):
// what a test of a service needs before its own tables.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool := Pool(tb, NewDB(tb))
	if err := idem.Migrate(context.Background(), pool); err != nil {
		tb.Fatalf("idemtest: idem.Migrate: %v", err)
	}
	return pool
}
