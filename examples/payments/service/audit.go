package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/db"
)

// AuditReport is the exactly-once audit of both idempotent operations, read from one
// snapshot of the database (so it holds while traffic runs: a business row and its key's
// completion commit together).
type AuditReport struct {
	Payments AuditCounts
	Refunds  AuditCounts
	// Samples lists up to 10 offenders of each kind and operation.
	Samples []AuditSample
}

// AuditCounts compares an operation's created keys (completed, stored answer 201) with
// its business rows, each of which records the scope and key that created it.
type AuditCounts struct {
	Operation           string
	Table               string
	CreatedKeys         int64 // completed keys whose answer was 201
	Rows                int64 // business rows
	KeysWithoutRow      int64 // a 201 was stored but no row committed
	RowsWithoutKey      int64 // a row committed without its key completing with 201
	KeysWithSeveralRows int64 // the business ran more than once for a key
}

// AuditSample is one offender.
type AuditSample struct {
	Operation string
	Problem   string // "key without a row", "row without a key", "key with several rows"
	Scope     string
	Key       string
}

// OK reports whether every created key has exactly one row and every row a created key.
func (c AuditCounts) OK() bool {
	return c.KeysWithoutRow == 0 && c.RowsWithoutKey == 0 && c.KeysWithSeveralRows == 0 && c.CreatedKeys == c.Rows
}

func (c AuditCounts) String() string {
	verdict := "OK"
	if !c.OK() {
		verdict = "FAILED"
	}
	return fmt.Sprintf("%s: %d created keys, %d %s rows; %d keys without a row, %d rows without a key, %d keys with several rows: %s",
		c.Operation, c.CreatedKeys, c.Rows, c.Table, c.KeysWithoutRow, c.RowsWithoutKey, c.KeysWithSeveralRows, verdict)
}

// OK reports whether both operations pass.
func (r *AuditReport) OK() bool { return r.Payments.OK() && r.Refunds.OK() }

func (r *AuditReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%s\n", r.Payments, r.Refunds)
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "  %s: %s: scope %q key %q\n", s.Operation, s.Problem, s.Scope, s.Key)
	}
	return b.String()
}

// Audit proves exactly-once from the data: for createPayment and createRefund, every
// completed key whose stored answer is 201 has exactly one business row, and every
// business row has such a key. Rows whose key was purged after its retention (or whose
// key was reused after it) count as offenders: audit within the retention window.
//
// On Citus (db/citus.sql) the audit reads every shard, through any node. Citus takes no
// snapshot across workers, but it reads each worker through one connection here
// (citus.max_adaptive_executor_pool_size = 1), so in one snapshot per worker; and since a
// request's key and rows live on one shard, committed together on its worker, the audit
// holds while traffic runs there too. Its statements go in the simple protocol
// (db.SimpleProtocol): Citus plans no multi-shard statement generically with parameters.
func Audit(ctx context.Context, pool *pgxpool.Pool) (*AuditReport, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// A setting of the citus extension; on a database without it, a placeholder that
	// nothing reads.
	if _, err := tx.Exec(ctx, "SET LOCAL citus.max_adaptive_executor_pool_size = 1"); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	q := db.New(db.SimpleProtocol(tx))
	const maxSamples = 10

	p, err := q.AuditPayments(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit payments: %w", err)
	}
	r, err := q.AuditRefunds(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit refunds: %w", err)
	}
	rep := &AuditReport{
		Payments: AuditCounts{Operation: "createPayment", Table: "payments", CreatedKeys: p.CreatedKeys, Rows: p.BusinessRows,
			KeysWithoutRow: p.KeysWithoutRow, RowsWithoutKey: p.RowsWithoutKey, KeysWithSeveralRows: p.KeysWithSeveralRows},
		Refunds: AuditCounts{Operation: "createRefund", Table: "refunds", CreatedKeys: r.CreatedKeys, Rows: r.BusinessRows,
			KeysWithoutRow: r.KeysWithoutRow, RowsWithoutKey: r.RowsWithoutKey, KeysWithSeveralRows: r.KeysWithSeveralRows},
	}
	if !rep.Payments.OK() {
		rows, err := q.AuditPaymentSamples(ctx, maxSamples)
		if err != nil {
			return nil, fmt.Errorf("audit payments: %w", err)
		}
		for _, s := range rows {
			rep.Samples = append(rep.Samples, AuditSample{Operation: "createPayment", Problem: s.Problem, Scope: s.Scope, Key: s.Key})
		}
	}
	if !rep.Refunds.OK() {
		rows, err := q.AuditRefundSamples(ctx, maxSamples)
		if err != nil {
			return nil, fmt.Errorf("audit refunds: %w", err)
		}
		for _, s := range rows {
			rep.Samples = append(rep.Samples, AuditSample{Operation: "createRefund", Problem: s.Problem, Scope: s.Scope, Key: s.Key})
		}
	}
	return rep, nil
}
