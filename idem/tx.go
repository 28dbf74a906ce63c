package idem

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

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

// deriveDomain starts the encoding a derived key is hashed from, so that it is no other
// scheme's hash of the same strings.
const deriveDomain = "idemgen/v2 derived key\x00"

// Derive returns the idempotency key to give the downstream call named name (say
// "charge", for a payment provider's charge): the same for every retry of this request,
// since a retry has the same scope and key, and different for another request or another
// name. Business code passes it on to the other service (a generated client takes it as
// idemclient.WithKey), so a business that is rolled back and run again, after a lost
// COMMIT, a crash or a serialization failure, calls the other service again with the same
// key, and that service answers with what it did the first time instead of doing it
// twice. The request sent with it must be the same on every retry too (derive it from the
// request and its key, not from rows the business writes: a payment's id is new on every
// run, and the other service would refuse the key with another payload).
//
// The key is a UUID (RFC 9562 version 8, lowercase) made of the first 128 bits of
// SHA-256 over a domain prefix and the uvarint length and bytes of scope, key and name:
// unambiguous (no two triples share an encoding), accepted by a downstream spec that
// declares its key format: uuid, and revealing nothing of the key it comes from.
func (k KeyInfo) Derive(name string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte(deriveDomain))
	for _, s := range []string{k.Scope, k.Key, name} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	var sum [sha256.Size]byte
	u := h.Sum(sum[:0])[:16]
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}
