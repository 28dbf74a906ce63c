package db_test

import (
	"context"
	_ "embed"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// schemaBeforeAccounts is schema.sql as it was before its tables were keyed by account
// (payments by id alone; refunds and payment_stars without account_id).
//
//go:embed testdata/schema-before-accounts.sql
var schemaBeforeAccounts string

// Migrate creates the tables keyed by account, and re-runs without changing them.
func TestMigrateRerun(t *testing.T) {
	ctx := context.Background()
	pool := idemtest.Pool(t, idemtest.NewDB(t))
	for range 2 {
		if err := db.Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	checkLayout(t, pool)
}

// Migrate upgrades a database of the earlier layout in place: every refund and star gets
// its payment's account, keys and references are remade with it, and the queries run.
func TestMigrateUpgradesEarlierLayout(t *testing.T) {
	ctx := context.Background()
	pool := idemtest.Pool(t, idemtest.NewDB(t))
	if _, err := pool.Exec(ctx, schemaBeforeAccounts, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO payments (id, account_id, amount, currency, amount_refunded, idempotency_scope, idempotency_key)
		 VALUES ('pay_a', 'acct_a', 1000, 'EUR', 300, 'acct_a', 'k1'), ('pay_b', 'acct_b', 500, 'EUR', 0, 'acct_b', 'k1')`,
		`INSERT INTO refunds (id, payment_id, amount, idempotency_scope, idempotency_key) VALUES ('re_a', 'pay_a', 300, 'acct_a', 'r1')`,
		`INSERT INTO payment_stars (payment_id, stars) VALUES ('pay_a', 2), ('pay_b', 1)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := db.Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	checkLayout(t, pool)

	var got string
	if err := pool.QueryRow(ctx, `SELECT string_agg(account_id || '/' || payment_id || '=' || stars, ' ' ORDER BY payment_id) FROM payment_stars`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "acct_a/pay_a=2 acct_b/pay_b=1"; got != want {
		t.Errorf("stars after the upgrade: %s; want %s", got, want)
	}
	if err := pool.QueryRow(ctx, `SELECT account_id FROM refunds WHERE id = 're_a'`).Scan(&got); err != nil || got != "acct_a" {
		t.Errorf("refund re_a's account after the upgrade: %q, %v; want acct_a", got, err)
	}

	q := db.New(pool)
	r, err := q.InsertRefund(ctx, db.InsertRefundParams{AccountID: "acct_a", PaymentID: "pay_a", Amount: 100, IdempotencyScope: "acct_a", IdempotencyKey: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.AddRefunded(ctx, db.AddRefundedParams{AccountID: "acct_a", ID: "pay_a", Amount: r.Amount})
	if err != nil || p.AmountRefunded != 400 {
		t.Fatalf("AddRefunded: %+v, %v; want 400 refunded", p, err)
	}
	star, err := q.StarPayment(ctx, db.StarPaymentParams{AccountID: "acct_b", ID: "pay_b"})
	if err != nil || star.Stars != 2 {
		t.Fatalf("StarPayment: %+v, %v; want 2 stars", star, err)
	}
	if _, err := q.StarPayment(ctx, db.StarPaymentParams{AccountID: "acct_b", ID: "pay_a"}); err != pgx.ErrNoRows {
		t.Fatalf("StarPayment of another account's payment: %v; want no rows", err)
	}
	if _, err := q.InsertRefund(ctx, db.InsertRefundParams{AccountID: "acct_b", PaymentID: "pay_a", Amount: 1, IdempotencyScope: "acct_b", IdempotencyKey: "r3"}); err == nil {
		t.Fatal("a refund of another account's payment was inserted; want a foreign key violation")
	}
}

// checkLayout checks the keys and references of the tables keyed by account.
func checkLayout(t *testing.T, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.conrelid::regclass::text || ' ' || c.contype::text || ' ' || pg_get_constraintdef(c.oid)
		  FROM pg_constraint c
		 WHERE c.conrelid IN ('payments'::regclass, 'refunds'::regclass, 'payment_stars'::regclass) AND c.contype IN ('p', 'f')
		 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"payment_stars f FOREIGN KEY (account_id, payment_id) REFERENCES payments(account_id, id)",
		"payment_stars p PRIMARY KEY (account_id, payment_id)",
		"payments p PRIMARY KEY (account_id, id)",
		"refunds f FOREIGN KEY (account_id, payment_id) REFERENCES payments(account_id, id)",
		"refunds p PRIMARY KEY (account_id, id)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("keys and references:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var def string
	if err := pool.QueryRow(context.Background(), `SELECT pg_get_indexdef('refunds_payment_id_idx'::regclass)`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(def, "(account_id, payment_id)") {
		t.Errorf("refunds_payment_id_idx: %s; want it on (account_id, payment_id)", def)
	}
}
