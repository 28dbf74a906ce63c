package idem_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// insertKeys adds rows first..first+n-1 straight into idempotency_keys (no protocol: the
// purge tests need many rows, and expiry times of their own), completed, row i expiring
// at now() + expiry, an SQL expression of i.
func insertKeys(t *testing.T, pool *pgxpool.Pool, first, n int, expiry string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, response_status, response_body, expires_at)
SELECT 'tenant-' || i % 100, md5(i::text)::uuid::text, 'createPayment', sha256(int4send(i)), 'completed', 201,
       convert_to(repeat('{"id":"' || md5(i::text) || '"}', 4), 'UTF8'),
       now() + (`+expiry+`)
FROM generate_series($1::int, $1::int + $2::int - 1) AS i`, first, n)
	if err != nil {
		t.Fatal(err)
	}
}

// A pass purges what had expired when it began, then ends, however fast rows keep
// expiring behind it. Here deletes are slowed to 5 ms a row (a trigger) and a row expires
// every millisecond for the next 25 s: a purge that deleted until no expired row was left
// would never catch up (before #28 it ran until its context ended).
func TestPurgePassEndsWhileRowsKeepExpiring(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	insertKeys(t, pool, 1, 20, "interval '-1 hour'")
	insertKeys(t, pool, 21, 30000, "(i - 5020) * interval '1 millisecond'") // 5 s expired, 25 s to come
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.005); RETURN OLD; END $$;
CREATE TRIGGER slow_delete BEFORE DELETE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION slow_delete();`); err != nil {
		t.Fatal(err)
	}
	// Only the 20 rows of an hour ago: the 20 s of already-expired rows are removed, so
	// that the pass has little to do and rows go on expiring at 1/ms from now.
	if _, err := pool.Exec(ctx, `ALTER TABLE idempotency_keys DISABLE TRIGGER slow_delete;
DELETE FROM idempotency_keys WHERE expires_at <= now() AND expires_at > now() - interval '1 minute';
ALTER TABLE idempotency_keys ENABLE TRIGGER slow_delete`); err != nil {
		t.Fatal(err)
	}
	before := count(t, pool, "true")

	// A deadline far beyond what the pass needs (20 rows, and those expiring during its
	// first statements: about 0.1 s), only so that a purge that never ends fails the test.
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	n, err := idem.NewStore(pool).Purge(pctx, 10)
	if err != nil {
		t.Fatalf("purge: %v after %d rows deleted (it did not end while rows kept expiring)", err, n)
	}
	if n < 20 || count(t, pool, "true") != before-int(n) {
		t.Fatalf("purge deleted %d rows (%d left of %d); want the 20 expired an hour ago at least", n, count(t, pool, "true"), before)
	}
	if left := count(t, pool, "expires_at <= now() - interval '1 minute'"); left != 0 {
		t.Fatalf("%d rows expired an hour ago left", left)
	}
}

// blockAccesses is the number of buffer accesses (hits and reads) of idempotency_keys and
// its indexes so far, on conn's backend, whose pending statistics it flushes first.
func blockAccesses(t *testing.T, conn *pgxpool.Conn) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := conn.QueryRow(ctx, `SELECT heap_blks_hit + heap_blks_read + coalesce(idx_blks_hit + idx_blks_read, 0)
FROM pg_statio_user_tables WHERE relname = 'idempotency_keys'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The batches of a pass never read again the index entries of the rows the batches
// before them deleted. Those entries stay until vacuum removes them; while an older
// snapshot is open (a long transaction, a replica's feedback, a backup) they cannot even
// be marked dead, and a batch that scanned expires_at from its start would visit every
// one of them and its heap tuple again: each batch slower than the one before (before
// #28, 20,000 rows in batches of 200 took ~146,000 buffer accesses, 7.3 a row; bounded
// batches take ~23,000, 1.2 a row, whatever the number of batches).
func TestPurgeBatchesDoNotRereadDeletedEntries(t *testing.T) {
	const rows = 20000
	url := keysBehindOlderSnapshot(t, rows, "VACUUM ANALYZE idempotency_keys")
	ctx := context.Background()

	pool := pgtest.PoolWithMax(t, url, 1) // every purge statement on one backend, measured
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := blockAccesses(t, conn)
	conn.Release()
	n, err := idem.NewStore(pool).Purge(ctx, 200)
	if err != nil || n != rows {
		t.Fatalf("purge: %d rows, %v; want %d", n, err, rows)
	}
	conn, err = pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	accesses := blockAccesses(t, conn) - start
	t.Logf("%d rows purged in batches of 200: %d buffer accesses (%.1f a row)", rows, accesses, float64(accesses)/rows)
	// Each row costs a bounded number of accesses (its index entries, found by both
	// statements of its batch, and its heap page, ~15 rows a page); rereading the deleted
	// entries adds accesses that grow with the number of batches.
	if accesses > 3*rows {
		t.Fatalf("%d buffer accesses to purge %d rows (%.1f a row): the batches reread the entries of the rows deleted before them", accesses, rows, float64(accesses)/rows)
	}
}

// A sweep (a pass from the start of the index) walks the entries of the rows deleted
// before it once, to find the first row left, and runs its batches from there: with an
// older snapshot open none of those entries can be marked dead, and a sweep whose first
// batch began at the start of the index read each of them twice (its bound, then its
// DELETE), each time fetching its heap tuple.
func TestSweepWalksDeletedEntriesOnce(t *testing.T) {
	const rows = 20000
	// Not ANALYZEd: statistics that count the rows about to be deleted would have the
	// planner read this small table whole, not its index, as it would not at 10M rows.
	url := keysBehindOlderSnapshot(t, rows, "VACUUM idempotency_keys")
	ctx := context.Background()
	pool := pgtest.PoolWithMax(t, url, 1) // every purge statement on one backend, measured
	store := idem.NewStore(pool)
	if n, err := store.Purge(ctx, 1000); err != nil || n != rows {
		t.Fatalf("first purge: %d rows, %v; want %d", n, err, rows)
	}
	insertKeys(t, pool, rows+1, 100, "interval '-1 minute'")
	before := indexEntriesRead(t, pool)
	if n, err := store.Purge(ctx, 1000); err != nil || n != 100 {
		t.Fatalf("sweep: %d rows, %v; want 100", n, err)
	}
	read := indexEntriesRead(t, pool) - before
	t.Logf("a sweep over %d deleted rows' entries and 100 rows: %d expires_at entries read", rows, read)
	if read > rows+rows/2 {
		t.Fatalf("a sweep over %d deleted rows' entries and 100 rows read %d expires_at entries; want each deleted one read once", rows, read)
	}
}

// indexEntriesRead is the number of entries index scans of idempotency_keys's expires_at
// index have returned so far (pg_stat_user_indexes.idx_tup_read; entries marked dead are
// stepped over, not returned), with the pending statistics of pool's backend flushed (the
// pool has one connection).
func indexEntriesRead(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		if _, err := c.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			return err
		}
		return c.QueryRow(ctx, `SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'idempotency_keys_expires_at_idx'`).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// keysBehindOlderSnapshot returns the URL of a new database with the key table and rows
// completed keys, row i expired an hour ago plus i ms, on which it ran prepare (a VACUUM;
// "" for none), and an open REPEATABLE READ snapshot older than every delete to come,
// until the test ends: nothing deleted is dead to all, so no index entry can be marked
// dead.
func keysBehindOlderSnapshot(t *testing.T, rows int, prepare string) string {
	t.Helper()
	url := pgtest.NewDB(t)
	setup := pgtest.Pool(t, url)
	ctx := context.Background()
	if err := idem.Migrate(ctx, setup); err != nil {
		t.Fatal(err)
	}
	insertKeys(t, setup, 1, rows, "interval '-1 hour' + i * interval '1 millisecond'")
	if prepare != "" {
		if _, err := setup.Exec(ctx, prepare); err != nil {
			t.Fatal(err)
		}
	}
	old, err := setup.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Rollback(ctx) })
	if _, err := old.Exec(ctx, "SELECT count(*) FROM idempotency_keys"); err != nil {
		t.Fatal(err)
	}
	return url
}

// count returns the number of idempotency_keys rows matching where.
func count(t *testing.T, pool *pgxpool.Pool, where string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys WHERE "+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// reloptions is the storage options of idempotency_keys, sorted, comma-separated.
func reloptions(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(array_to_string(ARRAY(SELECT unnest(reloptions) ORDER BY 1), ','), '')
FROM pg_class WHERE oid = 'idempotency_keys'::regclass`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The table carries its own autovacuum thresholds, in rows; Migrate adds them to a table
// made without them (before #28), and leaves a value an operator set.
func TestMigrateSetsAutovacuumThresholds(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const want = "autovacuum_vacuum_insert_scale_factor=0,autovacuum_vacuum_insert_threshold=100000," +
		"autovacuum_vacuum_scale_factor=0,autovacuum_vacuum_threshold=50000"
	if got := reloptions(t, pool); got != want {
		t.Fatalf("options after Migrate: %q, want %q", got, want)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE idempotency_keys RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold);
ALTER TABLE idempotency_keys SET (autovacuum_vacuum_threshold = 1234)`); err != nil {
		t.Fatal(err)
	}
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const kept = "autovacuum_vacuum_insert_scale_factor=0,autovacuum_vacuum_insert_threshold=100000," +
		"autovacuum_vacuum_scale_factor=0,autovacuum_vacuum_threshold=1234"
	if got := reloptions(t, pool); got != kept {
		t.Fatalf("options after Migrate on an older table with an operator's threshold: %q, want %q", got, kept)
	}
}

// waitExpiredRows waits for the database clock to pass the expiry of every row.
func waitExpiredRows(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); count(t, pool, "expires_at > now()") > 0; {
		if time.Now().After(deadline) {
			t.Fatal("rows not expired after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Purger's pass begins where its previous pass ended (that pass's cutoff), so it does
// not scan the entries of the rows the previous passes deleted, which vacuum has not
// removed yet, and which an older snapshot keeps from being marked dead: a pass from the
// start of the index visits each of them and its heap tuple again. (It revisits the
// previous pass's batches once, TestPurgerRevisitsThePreviousPass: those entries only.)
func TestPurgerResumesWhereItsLastPassEnded(t *testing.T) {
	const rows = 20000
	url := keysBehindOlderSnapshot(t, rows, "")
	setup := pgtest.Pool(t, url)
	ctx := context.Background()

	pool := pgtest.PoolWithMax(t, url, 1)
	store := idem.NewStore(pool)
	purger := idem.NewPurger(store, time.Hour, 200, func(idem.PurgeResult) {})
	first := purger.Once(ctx)
	if first.Err != nil || first.Deleted != rows || !first.CaughtUp || !first.From.IsZero() {
		t.Fatalf("first pass: %+v; want %d rows deleted from the start of the index", first, rows)
	}

	// pass measures a pass (of the purger, or Store.Purge) over 100 rows that expire
	// after the previous one: its buffer accesses.
	next := rows + 1
	pass := func(run func() (int64, error)) int64 {
		t.Helper()
		insertKeys(t, setup, next, 100, "interval '100 milliseconds'")
		next += 100
		waitExpiredRows(t, setup)
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := blockAccesses(t, conn)
		conn.Release()
		if n, err := run(); err != nil || n != 100 {
			t.Fatalf("pass: %d rows, %v; want 100", n, err)
		}
		conn, err = pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		return blockAccesses(t, conn) - start
	}
	// The second pass revisits the first one's 100 batches (their 20,000 entries, once):
	// the third, measured, revisits the second's batch only.
	var second, third idem.PurgeResult
	pass(func() (int64, error) { second = purger.Once(ctx); return second.Deleted, second.Err })
	if !second.From.Equal(first.Cutoff) || second.Revisited != first.Batches {
		t.Fatalf("second pass: %+v; want it to begin at the first one's cutoff %v and revisit its %d batches", second, first.Cutoff, first.Batches)
	}
	resumed := pass(func() (int64, error) { third = purger.Once(ctx); return third.Deleted, third.Err })
	if !third.From.Equal(second.Cutoff) || third.Revisited != second.Batches {
		t.Fatalf("third pass: %+v; want it to begin at the second one's cutoff %v and revisit its %d batches", third, second.Cutoff, second.Batches)
	}
	swept := pass(func() (int64, error) { return store.Purge(ctx, 200) }) // from the start
	t.Logf("a pass over 100 rows after %d deleted ones: %d buffer accesses resumed, %d from the start of the index", rows, resumed, swept)
	// Resumed, the pass reads the 100 rows' entries and pages; from the start, it reads
	// the deleted rows' too (their entries and heap pages, or the whole table when the
	// planner scans it: 20,000 dead rows are most of it).
	if resumed > 500 || swept < 3*resumed {
		t.Fatalf("a pass over 100 rows after %d deleted ones: %d buffer accesses resumed (want < 500, and a third of a pass from the start), %d from the start", rows, resumed, swept)
	}
}

// A row already past its expiry when the resumed passes' ranges (and the revisits of the
// previous pass's) have moved beyond it (a retention shorter than the transaction that
// wrote it) is left by the resumed passes and deleted by the next sweep: every
// PurgeSweepEvery-th pass begins at the start of the index, and so does the pass after a
// failed one.
func TestPurgerSweepsFromTheStart(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	purger := idem.NewPurger(idem.NewStore(pool), time.Hour, 10, func(idem.PurgeResult) {})
	first := purger.Once(ctx)
	if first.Err != nil || !first.From.IsZero() || !first.CaughtUp {
		t.Fatalf("first pass: %+v; want a sweep that caught up", first)
	}
	if r := purger.Once(ctx); r.Err != nil || r.From.IsZero() || r.Revisited != first.Batches {
		t.Fatalf("second pass: %+v; want a resumed pass that revisits the first one's %d batches", r, first.Batches)
	}
	// The straggler, behind the first pass's cutoff: in its range, which the second pass
	// revisited, and not in the second's.
	insertKeys(t, pool, 1, 1, "interval '-1 hour'")
	for pass := 3; pass <= idem.PurgeSweepEvery; pass++ {
		if r := purger.Once(ctx); r.Err != nil || r.From.IsZero() || r.Deleted != 0 {
			t.Fatalf("pass %d: %+v; want a resumed pass that deletes nothing", pass, r)
		}
	}
	if n := count(t, pool, "true"); n != 1 {
		t.Fatalf("%d rows before the sweep, want the straggler", n)
	}
	if r := purger.Once(ctx); r.Err != nil || !r.From.IsZero() || r.Deleted != 1 {
		t.Fatalf("pass %d: %+v; want a sweep from the start that deletes the straggler", idem.PurgeSweepEvery+1, r)
	}
	// After a failed pass (here its context ended), the next one sweeps too.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if r := purger.Once(cancelled); r.Err == nil {
		t.Fatalf("a pass with its context ended: %+v; want its error", r)
	}
	if r := purger.Once(ctx); r.Err != nil || !r.From.IsZero() {
		t.Fatalf("the pass after a failed one: %+v; want a sweep from the start", r)
	}
}

// A pass first deletes again the ranges of the previous pass's batches: its walk marks
// the deleted rows' index entries dead, so that a later walk from the start of the index
// (a sweep) steps over them instead of fetching each one's heap tuple (#28: a sweep's
// first batch took 482 ms at 10M rows), and a row committed into one of those ranges
// after that pass (its expiry already past) is deleted one pass later rather than by the
// next sweep.
func TestPurgerRevisitsThePreviousPass(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const rows = 1000
	insertKeys(t, pool, 1, rows, "interval '-1 hour' + i * interval '1 millisecond'")
	purger := idem.NewPurger(idem.NewStore(pool), time.Hour, 100, func(idem.PurgeResult) {})
	first := purger.Once(ctx)
	if first.Err != nil || first.Deleted != rows || first.Revisited != 0 {
		t.Fatalf("first pass: %+v; want %d rows deleted and nothing to revisit", first, rows)
	}
	flushCommits(t, pool)
	second := purger.Once(ctx)
	if second.Err != nil || second.From.IsZero() || second.Revisited != first.Batches || second.Deleted != 0 {
		t.Fatalf("second pass: %+v; want a resumed pass that revisits the first one's %d batches", second, first.Batches)
	}
	if fetches := heapFetchesFromStart(t, pool); fetches != 0 {
		t.Fatalf("a walk of expires_at from the start fetched %d heap tuples; want 0: the entries of the %d rows the first pass deleted marked dead", fetches, rows)
	}

	// A row committed after the second pass into its range (its one batch's).
	if _, err := pool.Exec(ctx, `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, expires_at)
VALUES ('tenant-1', 'late', 'createPayment', '\x00', 'completed', $1)`, first.Cutoff.Add((second.Cutoff.Sub(first.Cutoff))/2)); err != nil {
		t.Fatal(err)
	}
	if third := purger.Once(ctx); third.Err != nil || third.Revisited != second.Batches || third.Deleted != 1 {
		t.Fatalf("third pass: %+v; want a resumed pass that revisits the second one's %d batches and deletes the row committed into them", third, second.Batches)
	}
}

// flushCommits returns once the WAL of every commit before it is flushed. The test server
// commits without waiting for that (synchronous_commit = off), and a scan marks a deleted
// row's index entry dead only once its delete's commit is flushed (before, the tuple
// cannot be hinted as deleted by a committed transaction); a Purger's passes, an interval
// apart, come long after. A commit that waits for its own flush flushes the WAL before
// it; it waits only if its transaction wrote WAL (an xid alone does not), here a logical
// decoding message, which nothing reads.
func flushCommits(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "SET LOCAL synchronous_commit = on; SELECT pg_logical_emit_message(true, 'idem-test', '')")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// heapFetchesFromStart is the number of heap tuples an index-only scan of expires_at from
// the start of the index up to now fetches: one per entry not marked dead whose heap page
// is not all-visible (a deleted row's, until vacuum).
func heapFetchesFromStart(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT count(*) FROM idempotency_keys WHERE expires_at >= '-infinity' AND expires_at <= now()`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "Heap Fetches: %d", &n); err == nil {
			return n
		}
	}
	t.Fatalf("no index-only scan with heap fetches in the plan:\n%s", strings.Join(lines, "\n"))
	return 0
}
