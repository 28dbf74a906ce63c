package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SimpleProtocol returns d running its statements in pgx's simple protocol: the arguments
// travel in the statement's text, so the server plans each run with their values and
// never with a generic plan.
//
// On Citus, the statements that are not a plain single-table query (StarPayment, an
// INSERT ... SELECT; the audit's, which read every shard) cannot be planned generically
// with parameters ("could not create distributed plan"), and PostgreSQL may choose a
// generic plan for any prepared statement on its own (always under plan_cache_mode =
// force_generic_plan). On one PostgreSQL this changes nothing but the statement's
// planning, once per run.
func SimpleProtocol(d DBTX) DBTX { return simpleProtocol{d} }

type simpleProtocol struct{ db DBTX }

func (p simpleProtocol) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.db.Exec(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
}

func (p simpleProtocol) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.db.Query(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
}

func (p simpleProtocol) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.db.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
}
