package idem

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Defaults of [NewPurger] for arguments ≤ 0.
const (
	DefaultPurgeInterval  = 5 * time.Minute
	DefaultPurgeBatchSize = 1000
)

// PurgeResult is what one pass of a [Purger] did.
type PurgeResult struct {
	// Deleted is the number of idempotency_keys rows the pass deleted (also when Err is
	// set: the batches before the error stay deleted).
	Deleted int64
	// Duration is the pass's wall-clock time.
	Duration time.Duration
	// Err is the pass's error, if any (from [Store.Purge]). A pass cut short because the
	// Run context ended carries that context's error.
	Err error
}

// Purger deletes expired idempotency keys periodically: the loop a service runs in the
// background (in one replica or in all: concurrent purgers delete in short batches and
// wait at most briefly on each other's rows).
// Create it with [NewPurger]; for a cron job instead, see `idemgen purge`.
type Purger struct {
	store     *Store
	interval  time.Duration
	batchSize int
	report    func(PurgeResult)
}

// NewPurger returns a purger of store's expired keys: every interval (≤ 0 means
// [DefaultPurgeInterval]) it calls [Store.Purge] with batchSize (≤ 0 means
// [DefaultPurgeBatchSize]) rows per DELETE, until no expired row is left, and passes the
// [PurgeResult] of every pass to report. A nil report logs with log/slog's default
// logger: passes that deleted rows at Info, failed passes at Error, others at Debug.
func NewPurger(store *Store, interval time.Duration, batchSize int, report func(PurgeResult)) *Purger {
	if interval <= 0 {
		interval = DefaultPurgeInterval
	}
	if batchSize <= 0 {
		batchSize = DefaultPurgeBatchSize
	}
	if report == nil {
		report = logPurge
	}
	return &Purger{store: store, interval: interval, batchSize: batchSize, report: report}
}

// Run purges once at once, then once per interval (counted from the end of the previous
// pass), until ctx ends; it returns then. A failed pass is reported and the loop goes on.
//
//	go idem.NewPurger(store, 5*time.Minute, 1000, nil).Run(ctx)
func (p *Purger) Run(ctx context.Context) {
	timer := time.NewTimer(p.interval)
	defer timer.Stop()
	for ctx.Err() == nil {
		p.report(p.Once(ctx))
		timer.Reset(p.interval)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
	}
}

// Once runs one pass: it deletes every expired row, batchSize at a time, and returns what
// it did. It does not call the report function.
func (p *Purger) Once(ctx context.Context) PurgeResult {
	start := time.Now()
	n, err := p.store.Purge(ctx, p.batchSize)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return PurgeResult{Deleted: n, Duration: time.Since(start), Err: err}
}

func logPurge(r PurgeResult) {
	switch {
	case r.Err != nil && !errors.Is(r.Err, context.Canceled):
		slog.Error("idem: purge of expired idempotency keys failed", "deleted", r.Deleted, "duration", r.Duration, "err", r.Err)
	case r.Deleted > 0:
		slog.Info("idem: purged expired idempotency keys", "deleted", r.Deleted, "duration", r.Duration)
	default:
		slog.Debug("idem: purged expired idempotency keys", "deleted", r.Deleted, "duration", r.Duration)
	}
}
