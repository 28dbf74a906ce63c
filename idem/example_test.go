package idem_test

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemprom"
)

// A store for a service: keys scoped by the authenticated account, outcomes counted in
// Prometheus, connections that notice a dead network within seconds.
func ExampleNewStore() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	idem.ConfigureConnections(cfg, idem.DefaultTCPUserTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := idem.Migrate(ctx, pool); err != nil { // or apply migrations/ with your tool
		log.Fatal(err)
	}

	type accountKey struct{} // set by your authentication middleware
	scope := func(ctx context.Context) (string, error) {
		account, ok := ctx.Value(accountKey{}).(string)
		if !ok {
			return "", errors.New("no account in the request context")
		}
		return account, nil
	}
	outcomes := idemprom.NewOutcomes()
	store := idem.NewStore(pool,
		idem.WithScope(scope),
		idem.WithObserver(outcomes.Observe))
	prometheus.MustRegister(outcomes, idemprom.NewStoreCollector(store, time.Hour))
}

// The purge loop, in the background of a service (one replica or all of them: concurrent
// purgers skip each other's rows). A cron job can run `idemgen purge` instead.
func ExampleNewPurger() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store := idem.NewStore(pool)

	purger := idem.NewPurger(store, 10*time.Minute, 5000, func(r idem.PurgeResult) {
		if r.Err != nil {
			slog.Error("purging idempotency keys", "err", r.Err, "deleted", r.Deleted)
			return
		}
		slog.Info("purged idempotency keys", "deleted", r.Deleted, "took", r.Duration)
	})
	go purger.Run(ctx) // until ctx ends; a nil report function logs with slog
}
