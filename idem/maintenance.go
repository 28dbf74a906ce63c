package idem

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/idem/internal/citusdb"
	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// Purge runs one pass of the purge: it deletes the rows that were past retention when it
// began (completed, or v1 claims past their lease) and returns the number deleted. Rows
// that expire while it runs are left to the next pass, so a pass ends however fast keys
// keep expiring. It deletes in batches of batchSize rows (≤ 0 means
// [DefaultPurgeBatchSize]), each a range of the expires_at index that starts where the
// previous batch ended: no batch reads again the entries of the rows deleted before it
// (they stay in the index until vacuum); on plain PostgreSQL each batch runs in a
// transaction of its own with JIT off. Run it periodically (a cron job, or [Purger] in
// the service).
func (s *Store) Purge(ctx context.Context, batchSize int) (int64, error) {
	p, _ := s.purgePass(ctx, batchSize, time.Time{}, nil)
	return p.Deleted, p.Err
}

// purgeSpan is the expires_at range of one batch of a pass, both ends included: what a
// [Purger]'s next pass deletes again first (see revisit).
type purgeSpan struct{ from, upto pgtype.Timestamptz }

// maxRevisit is the most batches of a pass a [Purger] keeps to revisit: a pass that
// deleted more (a backlog of over 10M rows at the default batch size) has its latest
// ones revisited, and the next sweep walks the others.
const maxRevisit = 10_000

// purgePass runs one pass of Purge from expires_at = from (the zero time: from the start
// of the index), after deleting again the spans of revisit (see revisit), and says what it
// did (Duration is left to the caller) and which spans its own batches covered, preceded
// by those of revisit it did not reach if it failed.
func (s *Store) purgePass(ctx context.Context, batchSize int, from time.Time, revisit []purgeSpan) (PurgeResult, []purgeSpan) {
	if batchSize <= 0 {
		batchSize = DefaultPurgeBatchSize
	}
	r := PurgeResult{From: from}
	run, cutoff, err := s.purgeStart(ctx)
	if err != nil {
		r.Err = fmt.Errorf("idem: purge: %w", err)
		return r, revisit
	}
	r.Cutoff = cutoff.Time
	if left := s.revisit(ctx, run, &r, cutoff, revisit); len(left) > 0 {
		return r, left
	}
	after := pgtype.Timestamptz{Time: from, Valid: true}
	if from.IsZero() {
		first, err := s.firstLeft(ctx, run, &r, cutoff)
		if err != nil || len(first) == 0 {
			r.CaughtUp = err == nil
			return r, nil
		}
		after = first[0]
	}
	return r, s.purgeBatches(ctx, run, &r, batchSize, cutoff, after)
}

// firstLeft is a sweep's first statement: the expires_at of the first row left in the
// index up to cutoff (none: nothing to delete). One ordered index-only scan from the start
// of the index, which steps over the entries of the rows deleted before (marked dead by
// the revisits; a few milliseconds for ~1M of them, reading their leaf pages); the sweep's
// batches then begin at that row, and none of their statements, nor the planner's
// look-up of the range's end, walks those entries again (from -infinity the first batch's
// DELETE took 62–134 ms at 10M rows).
func (s *Store) firstLeft(ctx context.Context, run purgeRunner, r *PurgeResult, cutoff pgtype.Timestamptz) (first []pgtype.Timestamptz, err error) {
	start := time.Now()
	err = run(ctx, func(q *idemdb.Queries) (err error) {
		first, err = q.PurgeBound(ctx, idemdb.PurgeBoundParams{
			FromAt: pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, Cutoff: cutoff, BatchSize: 1})
		return err
	})
	r.LongestBatch = max(r.LongestBatch, time.Since(start))
	if err != nil {
		r.Err = fmt.Errorf("idem: purge: %w", err)
	}
	return first, err
}

// revisit deletes again, one statement each, the rows past retention at cutoff in the
// spans of a Purger's previous pass: rows committed into them after that pass deleted
// them (a transaction that outlived its retention), and v1 claims whose lease has ended
// since. Its walk marks the index entries of the rows that pass deleted dead, which no
// other statement reads again (later passes resume past them): a sweep, and the planner's
// look-ups at the index's ends, then step over them instead of visiting each one's heap
// tuple (482 ms for a sweep's first batch over ~200k such entries at 10M rows; an entry
// stays until a vacuum cleans the index, which PostgreSQL skips while under 2 % of the
// heap's pages hold dead rows). Each walk is one batch's entries, in an ordered scan of
// the index that stops at the first row left (PurgeBound's, which only a scan of the index
// answers: a bitmap scan, which a DELETE's plan may be, marks nothing); only a span with
// a row left is deleted again, and walked once more. It returns the spans it did not revisit, from the one that
// failed (r.Err), or none.
func (s *Store) revisit(ctx context.Context, run purgeRunner, r *PurgeResult, cutoff pgtype.Timestamptz, spans []purgeSpan) []purgeSpan {
	for i, sp := range spans {
		start := time.Now()
		n, err := s.revisitSpan(ctx, run, sp, cutoff)
		r.Deleted += n
		r.Revisited++
		r.LongestBatch = max(r.LongestBatch, time.Since(start))
		if err != nil {
			r.Err = fmt.Errorf("idem: purge: %w", err)
			return spans[i:]
		}
	}
	return nil
}

// revisitSpan walks sp's index entries up to its first row left; if there is one, it
// deletes the rows past retention at cutoff in sp, then walks the span again (the
// entries past that row).
func (s *Store) revisitSpan(ctx context.Context, run purgeRunner, sp purgeSpan, cutoff pgtype.Timestamptz) (n int64, err error) {
	walk := idemdb.PurgeBoundParams{FromAt: sp.from, Cutoff: sp.upto, BatchSize: 1}
	var left []pgtype.Timestamptz
	if err := run(ctx, func(q *idemdb.Queries) (err error) {
		left, err = q.PurgeBound(ctx, walk)
		return err
	}); err != nil || len(left) == 0 {
		return 0, err
	}
	if err := run(ctx, func(q *idemdb.Queries) (err error) {
		n, err = q.PurgeExpired(ctx, idemdb.PurgeExpiredParams{FromAt: sp.from, Upto: sp.upto, Cutoff: cutoff})
		return err
	}); err != nil {
		return 0, err
	}
	return n, run(ctx, func(q *idemdb.Queries) error {
		_, err := q.PurgeBound(ctx, walk)
		return err
	})
}

// purgeBatches deletes the rows past retention at cutoff from expires_at = after up to
// cutoff, batchSize rows a batch, and returns the spans of the batches it ran.
func (s *Store) purgeBatches(ctx context.Context, run purgeRunner, r *PurgeResult, batchSize int, cutoff, after pgtype.Timestamptz) []purgeSpan {
	var spans []purgeSpan
	for {
		start := time.Now()
		upto, last := cutoff, false
		var n int64
		err := run(ctx, func(q *idemdb.Queries) error {
			bound, err := q.PurgeBound(ctx, idemdb.PurgeBoundParams{FromAt: after, Cutoff: cutoff, BatchSize: int32(batchSize)})
			if err != nil {
				return err
			}
			if last = len(bound) == 0; !last {
				upto = bound[0]
			}
			n, err = q.PurgeExpired(ctx, idemdb.PurgeExpiredParams{FromAt: after, Upto: upto, Cutoff: cutoff})
			return err
		})
		r.Deleted += n
		r.Batches++
		r.LongestBatch = max(r.LongestBatch, time.Since(start))
		if err != nil {
			r.Err = fmt.Errorf("idem: purge: %w", err)
			return spans
		}
		spans = append(spans, purgeSpan{from: after, upto: upto})
		if last {
			r.CaughtUp = true
			return spans
		}
		// The next batch starts at upto again: rows sharing its expires_at beyond this batch
		// were deleted with it, and those it kept (v1 claims still leased) are passed over.
		// Unless the batch did not move: batchSize or more rows at one instant that stay.
		if upto.Time.Equal(after.Time) && upto.InfinityModifier == after.InfinityModifier {
			upto.Time = upto.Time.Add(time.Microsecond)
		}
		after = upto
	}
}

// purgeRunner runs one group of a pass's statements (a batch's bound and DELETE, a
// revisit's walk or DELETE) with q, their statements sent in the simple protocol: on
// plain PostgreSQL in a transaction of their own with JIT off (PurgeWithoutJIT says
// why), on Citus each statement on its own as before (its shards' statements are planned
// by the workers).
type purgeRunner func(ctx context.Context, fn func(q *idemdb.Queries) error) error

// purgeStart begins a pass: whether the database is a Citus node and the database clock
// (the pass's cutoff), read in one transaction with JIT off, and the runner for the
// pass's statements.
func (s *Store) purgeStart(ctx context.Context) (run purgeRunner, cutoff pgtype.Timestamptz, err error) {
	var citus bool
	err = s.withoutJIT(ctx, func(q *idemdb.Queries, tx pgx.Tx) (err error) {
		if citus, err = citusdb.New(tx).IsCitus(ctx); err != nil {
			return err
		}
		cutoff, err = q.PurgeCutoff(ctx)
		return err
	})
	if err != nil {
		return nil, cutoff, err
	}
	if citus {
		return func(ctx context.Context, fn func(q *idemdb.Queries) error) error { return fn(s.scan) }, cutoff, nil
	}
	return func(ctx context.Context, fn func(q *idemdb.Queries) error) error {
		return s.withoutJIT(ctx, func(q *idemdb.Queries, _ pgx.Tx) error { return fn(q) })
	}, cutoff, nil
}

// withoutJIT runs fn in a transaction of the store's pool whose first statement turns
// JIT off for it (PurgeWithoutJIT), with the queries on that transaction in the simple
// protocol; it commits if fn returns nil, else rolls back.
func (s *Store) withoutJIT(ctx context.Context, fn func(q *idemdb.Queries, tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := idemdb.New(simpleProtocol{tx})
		if err := q.PurgeWithoutJIT(ctx); err != nil {
			return err
		}
		return fn(q, tx)
	})
}

// StaleClaims counts the claims held now for longer than their lease: transactions that
// hold a key's lock (see [Store.HeldClaims]) and began longer ago than the store's stale
// age ([WithStaleAfter]; default the longest lease of the policies it has run). Read from
// the database's lock and activity views (pg_locks, pg_stat_activity), so it counts the
// claims of every replica on the database. A live owner is never cut off within its
// timeout, so a count above 0 that stays is a business running longer than its lease, or
// a lease shorter than the operation's timeout; owners that went silent are cut off by the
// database within the lease and leave the count on their own. A gauge worth alerting on.
func (s *Store) StaleClaims(ctx context.Context) (int64, error) {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return 0, fmt.Errorf("idem: count stale claims: %w", err)
	}
	var n int64
	if citus {
		n, err = citusdb.New(s.pool).CountClusterStaleClaims(ctx, s.staleAge().Microseconds())
	} else {
		n, err = s.q.CountStaleClaims(ctx, s.staleAge().Microseconds())
	}
	if err != nil {
		return 0, fmt.Errorf("idem: count stale claims: %w", err)
	}
	return n, nil
}

// staleAge is the age past which a held claim is stale.
func (s *Store) staleAge() time.Duration {
	if s.staleAfter > 0 {
		return s.staleAfter
	}
	if d := time.Duration(s.longestHold.Load()); d > 0 {
		return d
	}
	return DefaultLease
}

// RepeatedPayload is one request payload seen under several keys.
type RepeatedPayload struct {
	Scope       string
	Operation   string
	Fingerprint []byte // SHA-256, 32 bytes
	Keys        int64  // how many distinct keys carried it
}

// RepeatedPayloads lists payloads (operation + fingerprint) that arrived under more than
// one key in a scope within the last window, most keys first, at most limit rows (limit
// must be positive): clients that mint a new idempotency key per retry, which defeats the
// protocol.
func (s *Store) RepeatedPayloads(ctx context.Context, window time.Duration, limit int) ([]RepeatedPayload, error) {
	rows, err := s.scan.DuplicatePayloads(ctx, idemdb.DuplicatePayloadsParams{SinceUs: window.Microseconds(), MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("idem: repeated payloads: %w", err)
	}
	out := make([]RepeatedPayload, len(rows))
	for i, r := range rows {
		out[i] = RepeatedPayload{Scope: r.Scope, Operation: r.Operation, Fingerprint: r.Fingerprint, Keys: r.Keys}
	}
	return out, nil
}

// onCitus reports whether the store's database is a node of a Citus cluster (the citus
// extension is installed there), asked anew on each call: the monitoring reads then use
// Citus's cluster-wide views.
func (s *Store) onCitus(ctx context.Context) (bool, error) {
	return citusdb.New(s.pool).IsCitus(ctx)
}

// citusCached is onCitus asked once per store, on conn (the first claim under
// SERIALIZABLE asks; see [ErrSerializableOnCitus]).
func (s *Store) citusCached(ctx context.Context, conn *pgx.Conn) (bool, error) {
	switch s.citus.Load() {
	case 1:
		return false, nil
	case 2:
		return true, nil
	}
	citus, err := citusdb.New(conn).IsCitus(ctx)
	if err != nil {
		return false, fmt.Errorf("is the database a Citus node: %w", err)
	}
	if citus {
		s.citus.Store(2)
	} else {
		s.citus.Store(1)
	}
	return citus, nil
}

// simpleProtocol runs its statements in pgx's simple protocol: the arguments are sent in
// the statement's text, so the server plans it with their values. The statements that
// scan every shard on Citus (PurgeExpired, DuplicatePayloads) go through it, since Citus
// cannot plan a multi-shard statement with parameters under a generic plan ("could not
// create distributed plan"), which PostgreSQL may pick for any prepared statement.
type simpleProtocol struct{ db idemdb.DBTX }

func (p simpleProtocol) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.db.Exec(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
}

func (p simpleProtocol) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.db.Query(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
}

func (p simpleProtocol) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.db.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
}
