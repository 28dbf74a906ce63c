package service

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
)

// DB is the service's database: one pool, for the business transactions and the
// idempotency protocol's claims alike (each request is one transaction).
type DB struct {
	Pool *pgxpool.Pool
}

// Open connects to databaseURL (a postgres:// URL or key=value string), with at most
// maxConns connections when maxConns > 0, and applies the schemas ([Setup]). Connections
// notice a dead network within idem.DefaultTCPUserTimeout (idem.ConfigureConnections).
func Open(ctx context.Context, databaseURL string, maxConns int32) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	idem.ConfigureConnections(cfg, idem.DefaultTCPUserTimeout)
	d := &DB{}
	d.Pool, err = pgxpool.NewWithConfig(ctx, cfg)
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

// Close closes the pool.
func (d *DB) Close() {
	if d.Pool != nil {
		d.Pool.Close()
	}
}
