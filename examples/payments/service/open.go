package service

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgembed"
)

// DB is the service's database: the business pool, a small pool for the idempotency
// protocol's claims (so duplicates are answered while business transactions hold every
// business connection; see idem.WithClaimPool), and the embedded cluster behind them when
// there is one.
type DB struct {
	Pool      *pgxpool.Pool
	ClaimPool *pgxpool.Pool
	Embedded  *pgembed.Cluster // nil when databaseURL was given
}

// ClaimPoolSize is the size of DB.ClaimPool.
const ClaimPoolSize = 4

// Open connects to databaseURL, or, when it is empty, starts an embedded throwaway
// PostgreSQL from the local binaries (see internal/pgembed; its data is deleted by Close).
// maxConns > 0 bounds the pool. It then applies the schemas ([Setup]). logf receives
// progress lines.
func Open(ctx context.Context, databaseURL string, maxConns int32, logf func(format string, args ...any)) (*DB, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d := &DB{}
	if databaseURL == "" {
		logf("DATABASE_URL is empty: starting an embedded throwaway PostgreSQL (deleted on exit)")
		c, err := pgembed.Start(ctx, pgembed.Options{Logf: logf})
		if err != nil {
			return nil, fmt.Errorf("embedded PostgreSQL: %w", err)
		}
		d.Embedded = c
		databaseURL = c.URL()
		logf("embedded PostgreSQL ready at %s", databaseURL)
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	claimCfg := cfg.Copy()
	claimCfg.MaxConns = ClaimPoolSize
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

// Close closes the pool and stops the embedded cluster, if any, deleting its files.
func (d *DB) Close() error {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.ClaimPool != nil {
		d.ClaimPool.Close()
	}
	if d.Embedded != nil {
		return d.Embedded.Stop()
	}
	return nil
}
