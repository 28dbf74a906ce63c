package bench

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem"
)

// The floor is a hand-written handler that runs only what the protocol (DESIGN.md, steps
// 3 and 5) requires of the database, with as little Go as possible around it: no
// fingerprint of the decoded request, no recorded headers. It answers a duplicate 409 (the
// lock held elsewhere) and a completed key with its stored body, so that bursts of
// duplicates are answered as idem answers them. What idem costs beyond it is its Go layer;
// what it costs beyond bare is the protocol's SQL.

// floorLockSQL is LockKey (queries/idempotency_keys.sql): the key's lock, in a statement
// that reads its row (for Citus's routing), the first of the transaction.
const floorLockSQL = `SELECT pg_try_advisory_xact_lock($3::int, $4::int) AS locked,
       ((SELECT k.status FROM idempotency_keys AS k WHERE k.scope = $1::text AND k.key = $2::text) IS NOT NULL)::boolean AS present`

// floorReadSQL is GetKey: the key's row again, in the next statement, whose snapshot (READ
// COMMITTED) is taken once the lock is held; LockKey's predates its lock (idem/claim.go).
const floorReadSQL = `SELECT response_body FROM idempotency_keys WHERE scope = $1 AND key = $2`

// floorCompleteSQL is CompleteKey: the key's row born completed.
const floorCompleteSQL = `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status,
    response_status, response_headers, response_body, created_at, completed_at, expires_at)
VALUES ($1, $2, 'CreatePayment', $3, 'completed', 201, $4::jsonb, $5::bytea,
    statement_timestamp(), statement_timestamp(), statement_timestamp() + interval '24 hours')`

// protocolFloor is the whole protocol's SQL as idem sends it for a fresh key: BEGIN, the
// lock with the key's row and the row read again in one flight; the business INSERT; the completion and
// COMMIT in one flight.
type protocolFloor struct {
	scope, key string
	sum        [32]byte
}

// errFloorBusy and floorReplay are the floor's answers to a key held elsewhere, or
// completed.
var errFloorBusy = errors.New("floor: the key is held")

type floorReplay struct{ body []byte }

func (r floorReplay) Error() string { return "floor: replay" }

func (f *protocolFloor) begin(ctx context.Context, conn *pgx.Conn, r *http.Request, body []byte) error {
	f.sum = sha256.Sum256(body)
	f.scope, f.key = r.Header.Get(service.AccountHeader), r.Header.Get("Idempotency-Key")
	id := idem.LockID(f.scope, f.key)
	var locked, present bool
	var stored []byte
	if err := pipeline(ctx, conn,
		stmt{sql: "BEGIN"},
		stmt{sql: floorLockSQL, args: []any{f.scope, f.key, int32(id >> 32), int32(id)}, dest: []any{&locked, &present}},
		stmt{sql: floorReadSQL, args: []any{f.scope, f.key}, dest: []any{&stored}, sync: true}); err != nil {
		return err
	}
	switch {
	case !locked:
		return errFloorBusy
	case stored != nil:
		return floorReplay{stored}
	}
	return nil
}

func (f *protocolFloor) commit(ctx context.Context, conn *pgx.Conn, answer []byte) error {
	return pipeline(ctx, conn,
		stmt{sql: floorCompleteSQL, args: []any{f.scope, f.key, f.sum[:], []byte(`[["Content-Type","application/json"]]`), answer}},
		stmt{sql: "COMMIT", sync: true})
}

// stmt is one statement of a pipeline, followed by a sync point if sync.
type stmt struct {
	sql  string
	args []any
	dest []any // the first row's scan targets, if any
	sync bool
}

// pipeline sends stmts in one flight as prepared statements (pgx's default mode) and
// reads every result, each statement's first row into its dest; the first error wins.
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
	syncs := 0
	for i, s := range stmts {
		var eqb pgx.ExtendedQueryBuilder // the pipeline keeps its result formats
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
	results := 0
	for syncs > 0 {
		res, err := pl.GetResults()
		if err != nil {
			pl.Close()
			return errors.Join(first, err)
		}
		switch res := res.(type) {
		case *pgconn.ResultReader:
			results++
			if dest := stmts[results-1].dest; dest != nil {
				rows := pgx.RowsFromResultReader(conn.TypeMap(), res)
				for rows.Next() {
					if err := rows.Scan(dest...); err != nil && first == nil {
						first = err
					}
				}
				rows.Close()
				if err := rows.Err(); err != nil && first == nil {
					first = err
				}
				continue
			}
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
