package idem

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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
	// From is where the pass began along expires_at: the zero time for a sweep from the
	// start of the index, else the Cutoff of the purger's previous pass (see [Purger]).
	From time.Time
	// Cutoff is the database clock when the pass began (zero if it could not ask): the pass
	// deletes the rows that had expired by then, and no others.
	Cutoff time.Time
	// CaughtUp reports that the pass reached its Cutoff: every row that had expired by
	// then is deleted (but v1 claims still leased).
	CaughtUp bool
	// Batches is the number of batches the pass ran over its range (a bound and a
	// DELETE each), Revisited the number of the previous pass's batches it deleted again
	// first (a DELETE each: see [Purger]), and LongestBatch the longest time one of
	// either took.
	Batches      int
	Revisited    int
	LongestBatch time.Duration
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
//
// A pass that caught up deleted every row expired before its Cutoff, so the next pass
// begins there, not at the start of the expires_at index: the entries of the rows
// already deleted stay in the index until vacuum removes them, and while a snapshot
// older than their delete is open (a long transaction, a replica's hot_standby_feedback,
// a backup) each scan over them visits every one's heap tuple again. Every
// [PurgeSweepEvery]-th pass (and the first, and the one after a failed pass) begins at
// the start of the index instead, for the rows a resumed pass cannot see: rows whose
// expiry was already past when they committed (a retention shorter than the writing
// transaction), and v1 claims whose lease outlived their retention.
//
// Each pass first deletes again the ranges of the previous pass's batches (one DELETE a
// batch, at most the latest 10,000): it finds the rows committed into them after that
// pass, and its walk over the deleted rows' entries, an interval after their delete,
// marks them dead in the index, so that a sweep steps over them instead of visiting each
// one's heap tuple. Without it a sweep's first statement walked every row deleted since
// vacuum last cleaned the index (PostgreSQL skips that while under 2 % of the heap's
// pages hold dead rows): 482 ms at 10M rows, against one batch's few milliseconds.
type Purger struct {
	store     *Store
	interval  time.Duration
	batchSize int
	report    func(PurgeResult)

	mu      sync.Mutex
	resume  time.Time   // the Cutoff of the previous pass, if it caught up
	passes  int         // passes since the last sweep from the start of the index
	revisit []purgeSpan // the previous pass's batches, for the next one to revisit
}

// PurgeSweepEvery is how often a [Purger]'s pass begins at the start of the expires_at
// index rather than where its previous pass ended: hourly at the default interval.
const PurgeSweepEvery = 12

// NewPurger returns a purger of store's expired keys: every interval (≤ 0 means
// [DefaultPurgeInterval]) it runs a pass of [Store.Purge] with batchSize (≤ 0 means
// [DefaultPurgeBatchSize]) rows per DELETE, which deletes the keys expired when the pass
// began, and passes the [PurgeResult] of every pass to report. A nil report is
// [LogPurge].
func NewPurger(store *Store, interval time.Duration, batchSize int, report func(PurgeResult)) *Purger {
	if interval <= 0 {
		interval = DefaultPurgeInterval
	}
	if batchSize <= 0 {
		batchSize = DefaultPurgeBatchSize
	}
	if report == nil {
		report = LogPurge
	}
	return &Purger{store: store, interval: interval, batchSize: batchSize, report: report}
}

// Run purges once at once, then once per interval, until ctx ends; it returns then. The
// interval is counted from the start of the previous pass: a pass that caught up sleeps
// the rest of it, and a pass that took longer than the interval (a backlog: keys expired
// faster than it deleted them) is followed by the next one at once. A failed pass is
// reported and the loop goes on after the interval.
//
//	go idem.NewPurger(store, 5*time.Minute, 1000, nil).Run(ctx)
func (p *Purger) Run(ctx context.Context) {
	timer := time.NewTimer(p.interval)
	defer timer.Stop()
	for ctx.Err() == nil {
		r := p.Once(ctx)
		p.report(r)
		wait := p.interval
		if r.Err == nil {
			wait = max(0, p.interval-r.Duration)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
	}
}

// Once runs one pass: it deletes the rows expired when it began, batchSize at a time,
// and returns what it did. It does not call the report function.
func (p *Purger) Once(ctx context.Context) PurgeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := p.resume
	if p.passes%PurgeSweepEvery == 0 {
		from, p.passes = time.Time{}, 0
	}
	start := time.Now()
	r, spans := p.store.purgePass(ctx, p.batchSize, from, p.revisit)
	p.revisit = spans[max(0, len(spans)-maxRevisit):]
	if r.Err != nil && ctx.Err() != nil {
		r.Err = ctx.Err()
	}
	r.Duration = time.Since(start)
	p.passes++
	if r.CaughtUp && r.Err == nil {
		p.resume = r.Cutoff
	} else {
		p.resume, p.passes = time.Time{}, 0
	}
	return r
}

// LogPurge logs r with log/slog's default logger, as a [Purger] whose report function is
// nil does: passes that deleted rows at Info, failed passes at Error, others at Debug.
func LogPurge(r PurgeResult) {
	switch {
	case r.Err != nil && !errors.Is(r.Err, context.Canceled):
		slog.Error("idem: purge of expired idempotency keys failed", "deleted", r.Deleted, "duration", r.Duration, "err", r.Err)
	case r.Deleted > 0:
		slog.Info("idem: purged expired idempotency keys", "deleted", r.Deleted, "batches", r.Batches, "revisited", r.Revisited, "longest_batch", r.LongestBatch, "duration", r.Duration)
	default:
		slog.Debug("idem: purged expired idempotency keys", "deleted", r.Deleted, "batches", r.Batches, "revisited", r.Revisited, "longest_batch", r.LongestBatch, "duration", r.Duration)
	}
}
