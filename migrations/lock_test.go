package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// Migration 00003 (up and down) runs in one transaction, as the tools run a file; every
// statement is followed by a probe from another connection: a read of the key's row, as a
// claim makes it, under a short lock_timeout. Once a statement has taken an ACCESS
// EXCLUSIVE lock (DROP INDEX), it holds it to the commit, and every claim and replay waits:
// no index may be built after that point, or the whole build blocks reads.
func TestMigration00003BuildsBeforeItBlocksReads(t *testing.T) {
	for _, dir := range []string{"up", "down"} {
		t.Run(dir, func(t *testing.T) {
			pool := pgtest.Pool(t, pgtest.NewDB(t))
			ctx := context.Background()
			for _, f := range []string{"goose/00001_idempotency_keys.sql", "goose/00002_protocol_v2.sql", "goose/00003_created_at_brin.sql"} {
				up, _ := splitGoose(t, f)
				if dir == "up" && strings.HasPrefix(f, "goose/00003") {
					break
				}
				if _, err := pool.Exec(ctx, up, pgx.QueryExecModeSimpleProtocol); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			}
			up, down := splitGoose(t, "goose/00003_created_at_brin.sql")
			sql := up
			if dir == "down" {
				sql = down
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			blockedBy := ""
			for _, st := range strings.Split(sql, ";") {
				if st = strings.TrimSpace(st); st == "" {
					continue
				}
				if blockedBy != "" && strings.HasPrefix(st, "CREATE INDEX") {
					t.Errorf("%q builds an index while %q blocks every read of the table", st, blockedBy)
				}
				if _, err := tx.Exec(ctx, st); err != nil {
					t.Fatalf("%s: %v", st, err)
				}
				if blockedBy == "" && readBlocked(t, ctx, pool) {
					blockedBy = st
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// readBlocked reports whether a claim's read of a key's row waits on a table lock.
func readBlocked(t *testing.T, ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}) bool {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '200ms'"); err != nil {
		t.Fatal(err)
	}
	var n int
	err = tx.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE scope = 's' AND key = 'k'").Scan(&n)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
