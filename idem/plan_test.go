package idem

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// Every statement that reads one key finds its row through the primary key, whatever the table's statistics say and with the generic plan a pooled
// connection caches for a prepared statement. A plan through a secondary index with
// the key as a filter reads every row that index holds. The worst case for the planner is a new, empty table (a fresh deploy),
// where every index looks as cheap as the primary key; the test plans there, then again
// with thousands of v1 processing rows and expired rows.
func TestKeyStatementsUseThePrimaryKey(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string) []string {
		t.Helper()
		res, err := conn.Conn().PgConn().Exec(ctx, sql).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var lines []string
		for _, r := range res {
			for _, row := range r.Rows {
				lines = append(lines, string(row[0]))
			}
		}
		return lines
	}
	exec("SET plan_cache_mode = force_generic_plan")

	fp := []byte{1, 2, 3}
	st := pgtype.Int4{Int32: 201, Valid: true}
	statements := map[string]idemdb.Statement{
		"LockKey":     idemdb.LockKeyParams{LockHi: 1, LockLo: 2, Scope: "s", Key: "k"}.Statement(),
		"AwaitKey":    idemdb.AwaitKeyParams{LockHi: 1, LockLo: 2, Scope: "s", Key: "k"}.Statement(),
		"GetKey":      idemdb.GetKeyParams{Scope: "s", Key: "k"}.Statement(),
		"ClaimKeyRow": idemdb.ClaimKeyRowParams{Scope: "s", Key: "k", Operation: "op", Fingerprint: fp, RetentionUs: 1}.Statement(),
		"CompleteKeyOver": idemdb.CompleteKeyOverParams{Scope: "s", Key: "k", Operation: "op", Fingerprint: fp, ResponseStatus: st,
			ResponseHeaders: json.RawMessage(`[]`), ResponseBody: []byte("{}"), RetentionUs: 1}.Statement(),
		"DescribeKey": recorded(func(q *idemdb.Queries) {
			_, _ = q.DescribeKey(ctx, idemdb.DescribeKeyParams{Scope: "s", Key: "k"})
		}),
	}
	// Statements that write the key's row find a conflict through the primary key (an
	// INSERT ... ON CONFLICT has no scan to plan); those that read it must scan it.
	reads := map[string]bool{"LockKey": true, "AwaitKey": true, "GetKey": true, "DescribeKey": true}
	for name := range statements {
		if !reads[name] {
			delete(statements, name)
		}
	}
	secondary := regexp.MustCompile(`idempotency_keys_\w+_idx`)
	check := func(table string) {
		for name, s := range statements {
			exec("DEALLOCATE ALL")
			exec("PREPARE p AS " + s.SQL)
			plan := strings.Join(exec("EXPLAIN EXECUTE p("+literals(t, s.Args)+")"), "\n")
			usesKey := strings.Contains(plan, "idempotency_keys_pkey") || strings.Contains(plan, "Tid Scan")
			if idx := secondary.FindString(plan); idx != "" || !usesKey {
				t.Errorf("%s, %s table: the generic plan does not find the row by its primary key (index %q):\n%s", name, table, idx, plan)
			}
		}
	}
	check("empty")
	// v1 claims left 'processing' in an upgraded table.
	exec(`INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, lease_token, leased_until, expires_at)
		SELECT 's', 'p' || g, 'op', '\x00', 'processing', g, now() - interval '1 minute', now() - interval '1 second'
		FROM generate_series(1, 5000) AS g`)
	exec(`INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, expires_at, completed_at)
		SELECT 's', 'c' || g, 'op', '\x00', 'completed', now() - interval '1 second', now()
		FROM generate_series(1, 5000) AS g`)
	check("5000 stale processing and 5000 expired completed rows, not analyzed")

}

// recorded returns the statement call sends through its Queries.
func recorded(call func(*idemdb.Queries)) idemdb.Statement {
	var r statementRecorder
	call(idemdb.New(&r))
	return r.got
}

// statementRecorder is an idemdb.DBTX that records the statement sent and sends nothing.
type statementRecorder struct{ got idemdb.Statement }

func (r *statementRecorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.got = idemdb.Statement{SQL: sql, Args: args}
	return pgconn.CommandTag{}, errors.New("recorded")
}

func (r *statementRecorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.got = idemdb.Statement{SQL: sql, Args: args}
	return nil, errors.New("recorded")
}

func (r *statementRecorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.got = idemdb.Statement{SQL: sql, Args: args}
	return failedRow{}
}

// failedRow is the row of a statement that was recorded, not sent.
type failedRow struct{}

func (failedRow) Scan(...any) error { return errors.New("recorded") }

// literals renders statement arguments as SQL literals for EXECUTE.
func literals(t *testing.T, args []any) string {
	t.Helper()
	out := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case int64, int32:
			out[i] = fmt.Sprint(v)
		case []byte:
			out[i] = `'\x` + hex.EncodeToString(v) + "'"
		case json.RawMessage:
			out[i] = "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
		case pgtype.Int4:
			out[i] = fmt.Sprint(v.Int32)
		default:
			t.Fatalf("no literal for %T", a)
		}
	}
	return strings.Join(out, ", ")
}
