// Package pgtest gives tests a real PostgreSQL server.
//
// Call Main from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// If DATABASE_URL is set, tests use that server. Otherwise Main starts one
// throwaway cluster (see package pgembed) for the test binary and removes it
// when the tests finish. If neither is possible, Main prints how to install
// PostgreSQL and exits non-zero: tests are never skipped silently.
//
// Tests should call NewDB to get a database of their own, so that test
// packages running in parallel against a shared server do not interfere.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgembed"
)

// Name prefixes the messages of Main and of the test helpers: "pgtest", or the public
// package that wraps them (idemtest).
var Name = "pgtest"

var (
	baseURL string
	cluster *pgembed.Cluster
	dbSeq   atomic.Int64
)

// Main runs the tests of m against a PostgreSQL server and exits the process
// with the tests' exit code. It must be called from TestMain, at most once.
//
// With DATABASE_URL set it only checks that the server answers. Otherwise it
// starts a cluster with pgembed, runs the tests, then stops the cluster and
// deletes its files, also on SIGINT/SIGTERM. Progress is logged with -v.
func Main(m *testing.M) {
	flag.Parse() // for testing.Verbose; m.Run parses again harmlessly
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if u := os.Getenv("DATABASE_URL"); u != "" {
		baseURL = u
		if err := ping(ctx, u); err != nil {
			fmt.Fprintf(os.Stderr, Name+": DATABASE_URL server is not usable: %v\n", err)
			return 1
		}
		return m.Run()
	}

	opts := pgembed.Options{}
	if testing.Verbose() {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	c, err := pgembed.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, Name+": cannot start PostgreSQL: %v\n", err)
		return 1
	}
	cluster, baseURL = c, c.URL()

	// Clean up on Ctrl-C / kill as well. (If the process dies without
	// running this, the server still dies with it; pgembed removes the
	// leftover directory on a later start.)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, Name+": %v: stopping PostgreSQL\n", sig)
		_ = c.Stop()
		os.Exit(1)
	}()

	code := m.Run()
	signal.Stop(sigs)
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, Name+": stopping PostgreSQL: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// URL returns the base server URL (database "postgres" of the embedded
// cluster, or DATABASE_URL). It fails tb if Main was not called.
func URL(tb testing.TB) string {
	tb.Helper()
	if baseURL == "" {
		tb.Fatal("pgtest: no server; call pgtest.Main(m) from TestMain")
	}
	return baseURL
}

// Started reports whether Main has a server for the tests (DATABASE_URL or its cluster).
func Started() bool { return baseURL != "" }

// Cluster returns the embedded cluster, for tests that stop or restart the
// server. It returns nil when DATABASE_URL is used; such tests should then
// call tb.Skip, since they cannot control a shared server.
func Cluster() *pgembed.Cluster { return cluster }

// NewDB creates a new, empty database named idemtest_<n>_<random> and
// returns its URL. The database is dropped (WITH (FORCE), disconnecting
// clients) when the test and its subtests finish.
func NewDB(tb testing.TB) string {
	tb.Helper()
	base := URL(tb)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("idemtest_%d_%s", dbSeq.Add(1), hex.EncodeToString(rnd[:]))
	if err := execSQL(base, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf(Name+": %v", err)
	}
	tb.Cleanup(func() {
		if err := execSQL(base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf(Name+": %v", err)
		}
	})
	u, err := withDatabase(base, name)
	if err != nil {
		tb.Fatalf(Name+": %v", err)
	}
	return u
}

// Pool opens a pgx pool on connString with pgx's default maximum size
// (max(4, number of CPUs)) and closes it when the test finishes.
func Pool(tb testing.TB, connString string) *pgxpool.Pool {
	tb.Helper()
	return PoolWithMax(tb, connString, 0)
}

// PoolWithMax is like Pool with at most maxConns connections
// (0 means pgx's default, or pool_max_conns in connString).
func PoolWithMax(tb testing.TB, connString string, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		tb.Fatalf(Name+": %v", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf(Name+": %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		tb.Fatalf(Name+": connecting to database %q: %v", cfg.ConnConfig.Database, err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// execSQL runs one statement on a fresh connection to connString.
func execSQL(connString, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

func ping(ctx context.Context, connString string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// withDatabase returns connection string s pointing at database db. It
// accepts URLs (postgres://...) and keyword/value strings (host=... ...).
func withDatabase(s, db string) (string, error) {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return "", err
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	return s + " dbname=" + db, nil // a later keyword overrides an earlier one
}
