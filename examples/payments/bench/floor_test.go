package bench

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/examples/payments/service"
)

// The floors are hand-written handlers that run only what the protocol (DESIGN.md, steps
// 3 and 5) requires of the database, with as little Go as possible around it: no
// fingerprint of the decoded request, no recorded headers, no answers to duplicates
// (every request of the benchmark has a fresh key). What idem costs beyond them is its Go
// layer; what they cost beyond bare is the protocol's SQL.

// floorClaimSQL is the claim as idem sends it (queries/idempotency_keys.sql, ClaimKey):
// INSERT ... ON CONFLICT DO NOTHING into idempotency_keys (same table, same indexes),
// committed on its own without waiting for its WAL flush.
const floorClaimSQL = `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, lease_token, leased_until, expires_at)
SELECT $1::text, $2::text, 'CreatePayment', $3::bytea, 'processing', $4::bigint,
       now() + interval '30 seconds', now() + interval '24 hours'
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS s
ON CONFLICT (scope, key) DO NOTHING`

// floorLockSQL is LockOwnKey: the business transaction's own-row lock, fenced.
const floorLockSQL = `SELECT lease_token FROM idempotency_keys
WHERE scope = $1 AND key = $2 AND lease_token = $3 AND status = 'processing' FOR UPDATE`

// floorCompleteSQL is CompleteKey: the fenced completion that raises when the fence fails.
const floorCompleteSQL = `WITH completed AS (
    UPDATE idempotency_keys
    SET status = 'completed', response_status = 201, response_headers = $4::jsonb, response_body = $5::bytea,
        completed_at = statement_timestamp(), expires_at = statement_timestamp() + interval '24 hours'
    WHERE scope = $1 AND key = $2 AND lease_token = $3 AND status = 'processing'
    RETURNING 1
)
SELECT (CASE WHEN count(*) = 1 THEN '1' ELSE 'fence failed' END)::int FROM completed`

// claimFloor is bare plus the claim: the claim (its own implicit transaction) and BEGIN
// in one flight, then the business INSERT and COMMIT. No lock, no completion.
type claimFloor struct{ lease int64 }

func (f *claimFloor) begin(ctx context.Context, conn *pgx.Conn, r *http.Request, body []byte) error {
	sum := sha256.Sum256(body)
	f.lease = rand.Int64()
	return pipeline(ctx, conn,
		stmt{sql: floorClaimSQL, args: []any{r.Header.Get(service.AccountHeader), r.Header.Get("Idempotency-Key"), sum[:], f.lease}, sync: true},
		stmt{sql: "BEGIN", sync: true})
}

func (*claimFloor) commit(ctx context.Context, conn *pgx.Conn, _ []byte) error {
	_, err := conn.Exec(ctx, "COMMIT")
	return err
}

// protocolFloor is the whole protocol's SQL as idem sends it for a fresh key: the claim,
// BEGIN and the own-row lock in one flight; the business INSERT; the fenced completion
// and COMMIT in one flight.
type protocolFloor struct {
	scope, key string
	lease      int64
}

func (f *protocolFloor) begin(ctx context.Context, conn *pgx.Conn, r *http.Request, body []byte) error {
	sum := sha256.Sum256(body)
	f.scope, f.key, f.lease = r.Header.Get(service.AccountHeader), r.Header.Get("Idempotency-Key"), rand.Int64()
	return pipeline(ctx, conn,
		stmt{sql: floorClaimSQL, args: []any{f.scope, f.key, sum[:], f.lease}, sync: true},
		stmt{sql: "BEGIN"},
		stmt{sql: floorLockSQL, args: []any{f.scope, f.key, f.lease}, sync: true})
}

func (f *protocolFloor) commit(ctx context.Context, conn *pgx.Conn, answer []byte) error {
	return pipeline(ctx, conn,
		stmt{sql: floorCompleteSQL, args: []any{f.scope, f.key, f.lease, []byte(`[["Content-Type","application/json"]]`), answer}},
		stmt{sql: "COMMIT", sync: true})
}

// stmt is one statement of a pipeline, followed by a sync point if sync.
type stmt struct {
	sql  string
	args []any
	sync bool
}

// pipeline sends stmts in one flight as prepared statements (pgx's default mode) and
// reads every result; the first error wins.
func pipeline(ctx context.Context, conn *pgx.Conn, stmts ...stmt) error {
	sds := make([]*pgconn.StatementDescription, len(stmts))
	for i, s := range stmts {
		sd, err := conn.Prepare(ctx, s.sql, s.sql) // once per connection
		if err != nil {
			return err
		}
		sds[i] = sd
	}
	pl := conn.PgConn().StartPipeline(ctx)
	var eqb pgx.ExtendedQueryBuilder
	syncs := 0
	for i, s := range stmts {
		if err := eqb.Build(conn.TypeMap(), sds[i], s.args); err != nil {
			pl.Close()
			return err
		}
		pl.SendQueryStatement(sds[i], eqb.ParamValues, eqb.ParamFormats, eqb.ResultFormats)
		if s.sync {
			pl.SendPipelineSync()
			syncs++
		}
	}
	if err := pl.Flush(); err != nil {
		pl.Close()
		return err
	}
	var first error
	for syncs > 0 {
		res, err := pl.GetResults()
		if err != nil {
			pl.Close()
			return errors.Join(first, err)
		}
		switch res := res.(type) {
		case *pgconn.ResultReader:
			if _, err := res.Close(); err != nil && first == nil {
				first = err
			}
		case *pgconn.PipelineSync:
			syncs--
		default:
			pl.Close()
			return fmt.Errorf("bench: unexpected pipeline result %T", res)
		}
	}
	return errors.Join(first, pl.Close())
}
