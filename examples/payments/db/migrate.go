package db

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema is schema.sql: the payments, refunds and payment_stars tables, keyed by account.
// Every statement is re-runnable.
//
//go:embed schema.sql
var Schema string

// Migrate applies [Schema] (idempotent; serialised by an advisory lock, so several servers
// may start at once). Apply idem.Migrate first or after: the tables do not refer to it.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("payments schema: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(7255043115)"); err != nil {
		return fmt.Errorf("payments schema: %w", err)
	}
	if _, err := tx.Exec(ctx, Schema, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("payments schema: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("payments schema: %w", err)
	}
	return nil
}
