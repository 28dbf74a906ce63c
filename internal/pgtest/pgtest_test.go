package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestVersion(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.URL(t))
	var v string
	if err := pool.QueryRow(context.Background(), "SELECT version()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "PostgreSQL ") {
		t.Fatalf("version() = %q", v)
	}
	t.Log(v)
}

func TestNewDBDistinct(t *testing.T) {
	ctx := context.Background()
	a := pgtest.Pool(t, pgtest.NewDB(t))
	b := pgtest.Pool(t, pgtest.NewDB(t))
	var na, nb string
	if err := a.QueryRow(ctx, "SELECT current_database()").Scan(&na); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx, "SELECT current_database()").Scan(&nb); err != nil {
		t.Fatal(err)
	}
	if na == nb || !strings.HasPrefix(na, "idemtest_") || !strings.HasPrefix(nb, "idemtest_") {
		t.Fatalf("databases %q and %q: want two distinct idemtest_ names", na, nb)
	}
}

func TestNewDBIsolation(t *testing.T) {
	ctx := context.Background()
	a := pgtest.PoolWithMax(t, pgtest.NewDB(t), 2)
	b := pgtest.PoolWithMax(t, pgtest.NewDB(t), 2)
	if a.Config().MaxConns != 2 {
		t.Fatalf("MaxConns = %d, want 2", a.Config().MaxConns)
	}
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (id int); INSERT INTO only_in_a VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.QueryRow(ctx, "SELECT count(*) FROM only_in_a").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count in a = %d, %v", n, err)
	}
	var reg *string
	if err := b.QueryRow(ctx, "SELECT to_regclass('only_in_a')::text").Scan(&reg); err != nil {
		t.Fatal(err)
	}
	if reg != nil {
		t.Fatalf("table only_in_a visible in second database as %q", *reg)
	}
}

func TestNewDBDroppedAfterTest(t *testing.T) {
	var name string
	t.Run("sub", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(pgtest.NewDB(t))
		if err != nil {
			t.Fatal(err)
		}
		name = cfg.Database
	})
	pool := pgtest.Pool(t, pgtest.URL(t))
	var exists bool
	err := pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test finished", name)
	}
}

// TestRestart checks that the embedded cluster comes back on the same URL
// after a fast restart. Not possible against a shared DATABASE_URL server.
func TestRestart(t *testing.T) {
	c := pgtest.Cluster()
	if c == nil {
		t.Skip("DATABASE_URL set: no embedded cluster to restart")
	}
	ctx := context.Background()
	url := pgtest.NewDB(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE survives (id int); INSERT INTO survives VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	port := c.Port()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Port() != port {
		t.Fatalf("port changed from %d to %d", port, c.Port())
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("old connection still works after restart")
	}
	conn2, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	var v int
	if err := conn2.QueryRow(ctx, "SELECT id FROM survives").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: id = %d, %v", v, err)
	}
}
