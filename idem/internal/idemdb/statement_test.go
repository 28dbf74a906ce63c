package idemdb

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// recorder is a DBTX that records the statement a generated method sends.
type recorder struct{ got Statement }

var errRecorded = errors.New("recorded")

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.got = Statement{sql, args}
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.got = Statement{sql, args}
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.got = Statement{sql, args}
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errRecorded }

// Every hand-written Statement sends what its generated method sends: the same SQL, the
// same arguments in the same order (each argument distinct, so a swap shows).
func TestStatementsMatchGeneratedMethods(t *testing.T) {
	ctx := context.Background()
	fp, headers := []byte{1, 2}, json.RawMessage(`[]`)
	for name, c := range map[string]struct {
		stmt Statement
		call func(*Queries)
	}{
		"LockKey": {
			LockKeyParams{7, 8, "s", "k"}.Statement(),
			func(q *Queries) { q.LockKey(ctx, LockKeyParams{7, 8, "s", "k"}) },
		},
		"LockKeyOnly": {
			LockKeyOnlyParams{7, 8}.Statement(),
			func(q *Queries) { q.LockKeyOnly(ctx, LockKeyOnlyParams{7, 8}) },
		},
		"AwaitKey": {
			AwaitKeyParams{7, 8, "s", "k"}.Statement(),
			func(q *Queries) { q.AwaitKey(ctx, AwaitKeyParams{7, 8, "s", "k"}) },
		},
		"GetKey": {
			GetKeyParams{"s", "k"}.Statement(),
			func(q *Queries) { q.GetKey(ctx, GetKeyParams{"s", "k"}) },
		},
		"ClaimKeyRow": {
			ClaimKeyRowParams{"s", "k", "op", fp, 9}.Statement(),
			func(q *Queries) { q.ClaimKeyRow(ctx, ClaimKeyRowParams{"s", "k", "op", fp, 9}) },
		},
		"CompleteKey": {
			CompleteKeyParams{"s", "k", "op", fp, pgtype.Int4{Int32: 201, Valid: true}, headers, []byte{3}, 9}.Statement(),
			func(q *Queries) {
				q.CompleteKey(ctx, CompleteKeyParams{"s", "k", "op", fp, pgtype.Int4{Int32: 201, Valid: true}, headers, []byte{3}, 9})
			},
		},
		"CompleteKeyOver": {
			CompleteKeyOverParams{"s", "k", "op", fp, pgtype.Int4{Int32: 201, Valid: true}, headers, []byte{3}, 9}.Statement(),
			func(q *Queries) {
				q.CompleteKeyOver(ctx, CompleteKeyOverParams{"s", "k", "op", fp, pgtype.Int4{Int32: 201, Valid: true}, headers, []byte{3}, 9})
			},
		},
	} {
		r := &recorder{}
		c.call(New(r))
		if !reflect.DeepEqual(r.got, c.stmt) {
			t.Errorf("%s: Statement() = %q %v, the generated method sends %q %v", name, c.stmt.SQL, c.stmt.Args, r.got.SQL, r.got.Args)
		}
	}
}
