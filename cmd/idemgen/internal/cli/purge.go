package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/cliflag"
)

const purgeHelp = `usage: idemgen purge [-database-url URL] [-batch N] [-timeout D] [-dry-run]

Deletes expired idempotency keys: completed keys past their retention, and claims past
both their retention and their lease. It deletes the keys expired when it began, -batch
rows per statement along the expires_at index, then prints how many rows it deleted
(keys that expire while it runs are the next run's). Concurrent purges (several cron jobs, or
idem.Purger in the services) may run at once: each deletes in short batches. Meant
for a cron job, e.g. hourly:

  0 * * * *  DATABASE_URL=postgres://... idemgen purge -batch 5000

A service can run the same loop itself: idem.NewPurger(store, interval, batch, report).
With -dry-run it deletes nothing and prints how many rows are expired now.

The connection string is -database-url, else the DATABASE_URL environment variable
(a postgres:// URL or key=value string; add options such as search_path there).
`

// expiredSQL counts the rows idem.Store.Purge deletes (its predicate; TestPurge checks
// that the two agree).
const expiredSQL = `SELECT count(*) FROM idempotency_keys
WHERE expires_at <= now() AND (status = 'completed' OR leased_until <= now())`

// purgeFlags are the flags of purge.
type purgeFlags struct {
	dbURL   *string
	batch   *int
	timeout *time.Duration
	dryRun  *bool
}

func newPurgeFlags() (*flag.FlagSet, purgeFlags) {
	fs := newFlagSet("purge")
	return fs, purgeFlags{
		dbURL:   fs.String("database-url", "", "PostgreSQL connection `URL` (default $DATABASE_URL)"),
		batch:   fs.Int("batch", idem.DefaultPurgeBatchSize, "rows deleted per statement, `N`"),
		timeout: fs.Duration("timeout", 0, "give up after `D` (e.g. 10m); 0: no limit"),
		dryRun:  fs.Bool("dry-run", false, "delete nothing; print how many rows are expired"),
	}
}

func purge(args []string, stdout, stderr io.Writer) int {
	fs, f := newPurgeFlags()
	rest, code, done := cliflag.Parse(fs, args, purgeHelp, stdout, stderr)
	if done {
		return code
	}
	if len(rest) > 0 {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("unexpected argument %q", rest[0]))
	}
	if *f.dbURL == "" {
		*f.dbURL = os.Getenv("DATABASE_URL")
	}
	if *f.dbURL == "" {
		return usageErrors(stderr, fs.Name(), "no database: set -database-url or DATABASE_URL")
	}
	if *f.batch < 1 {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("-batch must be at least 1, got %d", *f.batch))
	}
	cfg, err := pgxpool.ParseConfig(*f.dbURL)
	if err != nil {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("database URL: %v", err))
	}
	cfg.MaxConns = 1

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *f.timeout)
		defer cancel()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return purgeFailed(ctx, stderr, *f.timeout, err, "nothing deleted")
	}
	defer pool.Close()

	if *f.dryRun {
		var n int64
		if err := pool.QueryRow(ctx, expiredSQL).Scan(&n); err != nil {
			return purgeFailed(ctx, stderr, *f.timeout, err, "the expired keys were not counted")
		}
		fmt.Fprintf(stdout, "%d expired idempotency keys (dry run: nothing deleted)\n", n)
		return ExitOK
	}
	r := idem.NewPurger(idem.NewStore(pool), 0, *f.batch, nil).Once(ctx)
	took := r.Duration.Round(time.Millisecond)
	if r.Err != nil {
		if r.Deleted > 0 {
			fmt.Fprintf(stdout, "deleted %d expired idempotency keys in %s before the error\n", r.Deleted, took)
		}
		return purgeFailed(ctx, stderr, *f.timeout, r.Err, fmt.Sprintf("%d rows deleted so far", r.Deleted))
	}
	fmt.Fprintf(stdout, "deleted %d expired idempotency keys in %s\n", r.Deleted, took)
	return ExitOK
}

// purgeFailed prints why purge stopped and returns ExitFail: "-timeout 1ns elapsed;
// 0 rows deleted so far" when its timeout ran out (progress says how far it got),
// "interrupted; ..." on a signal, else err, with what to do when the table is missing.
func purgeFailed(ctx context.Context, stderr io.Writer, timeout time.Duration, err error, progress string) int {
	deadline, hasDeadline := ctx.Deadline()
	switch {
	case hasDeadline && !time.Now().Before(deadline): // ctx.Err() may lag the deadline
		fmt.Fprintf(stderr, "idemgen purge: -timeout %s elapsed; %s\n", timeout, progress)
		return ExitFail
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "idemgen purge: interrupted; %s\n", progress)
		return ExitFail
	}
	fmt.Fprintf(stderr, "idemgen purge: %v\n", err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		fmt.Fprintln(stderr, "idemgen purge: the idempotency_keys table is missing: apply migrations/ with your tool, `idemgen schema`, or call idem.Migrate on start")
	}
	return ExitFail
}
