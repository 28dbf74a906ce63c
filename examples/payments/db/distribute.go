package db

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Citus is citus.sql: it distributes idempotency_keys by scope and the example's tables by
// account_id, co-located with it, on a Citus coordinator. Re-runnable.
//
//go:embed citus.sql
var Citus string

// Distribute applies [Citus] through pool, whose database must be a Citus coordinator's,
// after idem.Migrate and [Migrate]. A table already distributed is left as it is.
func Distribute(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, Citus, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("payments: distribute on Citus: %w", err)
	}
	return nil
}
