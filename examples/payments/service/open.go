package service

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the service's database: the business pool, and a small pool for the idempotency
// protocol's claims (so duplicates are answered while business transactions hold every
// business connection; see idem.WithClaimPool).
type DB struct {
	Pool      *pgxpool.Pool
	ClaimPool *pgxpool.Pool
}

// ClaimPoolSize is the size of DB.ClaimPool.
const ClaimPoolSize = 4

// Open connects to databaseURL (a postgres:// URL or key=value string), with at most
// maxConns business connections when maxConns > 0, and applies the schemas ([Setup]).
func Open(ctx context.Context, databaseURL string, maxConns int32) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	claimCfg := cfg.Copy()
	claimCfg.MaxConns = ClaimPoolSize
	d := &DB{}
	d.Pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		d.ClaimPool, err = pgxpool.NewWithConfig(ctx, claimCfg)
	}
	if err == nil {
		err = d.Pool.Ping(ctx)
	}
	if err == nil {
		err = Setup(ctx, d.Pool)
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("database: %w", err)
	}
	return d, nil
}

// Close closes both pools.
func (d *DB) Close() {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.ClaimPool != nil {
		d.ClaimPool.Close()
	}
}
