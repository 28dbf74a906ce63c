package idem

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is what business code gets inside the protocol's transaction: the query methods of a
// pgx.Tx and nothing else (no Commit, no Rollback: the protocol commits the business
// writes together with the key's outcome). It has the method set of sqlc's pgx/v5 DBTX
// (plus CopyFrom and SendBatch), so `db.New(tx)` works with sqlc-generated queries.
type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// txOnly hands business code the query methods of q (a *pgx.Conn inside the protocol's
// transaction, or a pgx.Tx) and hides the rest (Commit, Rollback, Close, PgConn).
type txOnly struct{ q Tx }

func (t txOnly) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.q.Exec(ctx, sql, args...)
}
func (t txOnly) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.q.Query(ctx, sql, args...)
}
func (t txOnly) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.q.QueryRow(ctx, sql, args...)
}
func (t txOnly) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.q.CopyFrom(ctx, table, columns, src)
}
func (t txOnly) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.q.SendBatch(ctx, b)
}

type ctxKey struct{}

// KeyInfo is the idempotency key of the request being run, for business code (e.g. to pass
// downstream as a payment provider's idempotency key).
type KeyInfo struct {
	Scope string
	Key   string
}

// KeyFromContext returns the key of the request whose business function got ctx; ok is
// false when the request carried none.
func KeyFromContext(ctx context.Context) (k KeyInfo, ok bool) {
	k, ok = ctx.Value(ctxKey{}).(KeyInfo)
	return k, ok
}
