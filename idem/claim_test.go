package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// parked is an owner held inside its business function, after its business INSERT: the
// claim's transaction is open and the key's lock held. pid is its backend.
type parked struct {
	resp   *Response
	err    error
	pid    int
	inside chan struct{} // closed once the owner is parked
	resume func()        // lets it finish
	done   chan struct{} // closed when its call returned
}

// park starts a call on key under p whose business function inserts its row, then waits
// until resume is called (or its context ends).
func (e *env) park(t *testing.T, p *Policy, key string) *parked {
	t.Helper()
	o := &parked{inside: make(chan struct{}), done: make(chan struct{})}
	release := make(chan struct{})
	o.resume = sync.OnceFunc(func() { close(release) })
	t.Cleanup(o.resume) // a failed test does not leave the owner parked
	go func() {
		defer close(o.done)
		o.resp, o.err = e.store.Do(context.Background(), p, ptr(key), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
			if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&o.pid); err != nil {
				return nil, err
			}
			r, err := insertOne("x")(ctx, tx)
			close(o.inside)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return r, err
		})
	}()
	select {
	case <-o.inside:
	case <-o.done:
		t.Fatalf("the owner returned before its business ran: %+v, %v", o.resp, o.err)
	}
	return o
}

// finish resumes the owner and waits for its call.
func (o *parked) finish() {
	o.resume()
	<-o.done
}

// heldLocks counts the two-key advisory locks (the claims) held in the test's database.
func (e *env) heldLocks() int {
	return e.int(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
}

// The claim's lock value is a function of (scope, key) whose encoding is unambiguous: pairs
// that concatenate to the same text get different locks.
func TestLockIDUnambiguous(t *testing.T) {
	seen := map[int64]string{}
	for _, sk := range [][2]string{{"", "ab"}, {"a", "b"}, {"ab", ""}, {"a\x01", "b"}, {"a", "\x01b"}, {"", ""}} {
		id := LockID(sk[0], sk[1])
		if prev, ok := seen[id]; ok {
			t.Fatalf("LockID(%q, %q) = LockID of %s", sk[0], sk[1], prev)
		}
		seen[id] = fmt.Sprintf("%q", sk)
	}
	if LockID("s", "k") != LockID("s", "k") {
		t.Fatal("LockID is not deterministic")
	}
}

// While an owner runs, a duplicate is answered 409 at once, with Retry-After 1 (when a retry
// is likely to find the owner's answer, whatever the lease and timeout: the longest the owner
// could hold the key would make clients that honour Retry-After wait that long): it never
// waits on the owner's lock.
func TestDuplicateWhileOwnerRuns(t *testing.T) {
	e := newEnv(t)
	long := policy("createThing")
	long.Lease = time.Minute
	o := e.park(t, long, "k")
	short := policy("createThing")
	short.Lease = 2 * time.Second
	bounded := policy("createThing")
	bounded.Lease, bounded.Timeout = time.Minute, 5*time.Second
	for _, c := range []struct {
		p          *Policy
		retryAfter string
	}{{short, "1"}, {long, "1"}, {bounded, "1"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := e.store.Do(ctx, c.p, ptr("k"), parts("x"), insertOne("x"))
		cancel()
		if err != nil || r.Status != http.StatusConflict || r.Outcome != OutcomeInProgress || header(r, "Retry-After") != c.retryAfter {
			t.Fatalf("lease %s timeout %s: %+v, %v; want 409 with Retry-After %s", c.p.Lease, c.p.Timeout, r, err, c.retryAfter)
		}
	}
	if n := e.heldLocks(); n != 1 {
		t.Fatalf("%d claims held while the owner runs, want 1 (duplicates leave none)", n)
	}
	o.finish()
	if o.err != nil || o.resp.Outcome != OutcomeCompleted || e.rows("") != 1 || e.heldLocks() != 0 {
		t.Fatalf("owner: %+v, %v; %d rows, %d claims held; want completed, 1, 0", o.resp, o.err, e.rows(""), e.heldLocks())
	}
}

// With REPEATABLE READ or SERIALIZABLE as the database's default isolation (the policy says
// nothing), 50 duplicates released together execute once and get no server error, round
// after round: the snapshot that predates the lock never lets the business run twice.
func TestDefaultIsolationDuplicates(t *testing.T) {
	for _, iso := range []string{"repeatable read", "serializable"} {
		t.Run(iso, func(t *testing.T) {
			url := pgtest.NewDB(t)
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			// From another database, before any connection to the new one (behind PgBouncer,
			// a server connection opened earlier would keep the old default).
			admin := pgtest.Pool(t, pgtest.URL(t))
			if _, err := admin.Exec(context.Background(), fmt.Sprintf(
				"ALTER DATABASE %s SET default_transaction_isolation = '%s'",
				pgx.Identifier{cfg.Database}.Sanitize(), iso)); err != nil {
				t.Fatal(err)
			}
			admin.Close()
			e := newEnvOn(t, url)
			if got := e.int("SELECT (current_setting('transaction_isolation') = '" + iso + "')::int"); got != 1 {
				t.Fatalf("the database default is not %s", iso)
			}
			p := policy("createThing")
			const n, rounds = 50, 4
			for round := range rounds {
				key := fmt.Sprintf("round-%d", round)
				resps := make([]*Response, n)
				errs := make([]error, n)
				var calls atomic.Int64 // the business's calls, not only its committed rows
				business := func(ctx context.Context, tx Tx) (*Response, error) {
					calls.Add(1)
					return insertOne("x")(ctx, tx)
				}
				release(n, func(i int) {
					resps[i], errs[i] = e.store.Do(context.Background(), p, ptr(key), parts("x"), business)
				})
				executed := 0
				for i, r := range resps {
					if errs[i] != nil || r.Status >= 500 {
						t.Fatalf("round %d: call %d: %+v, %v", round, i, r, errs[i])
					}
					switch r.Outcome {
					case OutcomeCompleted:
						executed++
					case OutcomeInProgress, OutcomeReplayed:
					default:
						t.Fatalf("round %d: call %d: outcome %s", round, i, r.Outcome)
					}
				}
				if executed != 1 || calls.Load() != 1 || e.rows("WHERE key = $1", key) != 1 {
					t.Fatalf("round %d: %d executions, %d calls, %d business rows; want 1, 1, 1", round, executed, calls.Load(), e.rows("WHERE key = $1", key))
				}
			}
		})
	}
}

// Under REPEATABLE READ the claim's snapshot is taken before its lock is granted: a row
// committed in between is invisible to it. ClaimKeyRow, written before the business, fails
// with 40001 on such a row (the request is retried, and replays), and writes nothing over a
// visible row that is not takeable.
func TestClaimKeyRowSurfacesRowsTheSnapshotMisses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fp, _ := Fingerprint("createThing", parts("x")...)
	tx, err := e.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil { // the snapshot
		t.Fatal(err)
	}
	if r := e.do(policy("createThing"), "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("the other writer: %s", r.Outcome)
	}
	claim := idemdb.ClaimKeyRowParams{Scope: "", Key: "k", Operation: "createThing", Fingerprint: fp, RetentionUs: time.Hour.Microseconds()}
	_, err = idemdb.New(tx).ClaimKeyRow(ctx, claim)
	if var40001 := retryable(err); !var40001 {
		t.Fatalf("ClaimKeyRow over a row the snapshot cannot see: %v, want 40001", err)
	}
	if n, err := idemdb.New(e.pool).ClaimKeyRow(ctx, claim); err != nil || n != 0 {
		t.Fatalf("ClaimKeyRow over a visible completed row: %d rows, %v; want 0", n, err)
	}
}

// Killing the owner's backend (pg_terminate_backend, as a crash of the service or of its
// connection does) frees the key at once: the retry executes without waiting for any
// lease, exactly once.
func TestKilledOwnerFreesTheKeyAtOnce(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing") // a 30s lease: the retry must not wait for it
	o := e.park(t, p, "k")
	if _, err := e.pool.Exec(context.Background(), "SELECT pg_terminate_backend($1)", o.pid); err != nil {
		t.Fatal(err)
	}
	e.waitFor("NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", o.pid)
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry right after the kill: %d %s, want an execution", r.Status, r.Outcome)
	}
	o.finish()
	if o.err == nil {
		t.Fatalf("the killed owner succeeded: %+v", o.resp)
	}
	if e.rows("") != 1 || e.int("SELECT count(*) FROM idempotency_keys WHERE status = 'completed'") != 1 {
		t.Fatalf("%d business rows, want 1", e.rows(""))
	}
}

// An owner that goes silent inside its transaction (frozen, partitioned: no statement
// runs) is cut off by the database once its transaction idled for the lease: retries get
// 409 until then and execute after, exactly once; the silent owner's work is rolled back.
func TestSilentOwnerCutOffWithinTheLease(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Lease = time.Second
	start := time.Now()
	o := e.park(t, p, "k")
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeInProgress {
		t.Fatalf("retry while the owner holds the key: %s, want in_progress", r.Outcome)
	}
	e.waitFor("NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", o.pid)
	if held := time.Since(start); held > 10*time.Second {
		t.Fatalf("the silent owner held the key for %s, with a 1s lease", held)
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry after the owner was cut off: %s, want an execution", r.Outcome)
	}
	o.finish()
	if o.err == nil || errors.Is(o.err, ErrCommitUnknown) {
		t.Fatalf("the cut-off owner: %+v, %v; want a failure that is not an unknown commit", o.resp, o.err)
	}
	if e.rows("") != 1 {
		t.Fatalf("%d business rows, want 1", e.rows(""))
	}
}

// A live owner inside its timeout is never cut off, even when its lease is shorter: the
// idle bound is then the timeout + 1s.
func TestLiveOwnerWithinTimeoutOutlivesAShortLease(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Lease, p.Timeout = time.Second, 5*time.Second
	o := e.park(t, p, "k")
	// Idle for longer than the lease, well within the timeout.
	e.waitFor("now() - state_change > interval '2 seconds' FROM pg_stat_activity WHERE pid = $1", o.pid)
	o.finish()
	if o.err != nil || o.resp.Outcome != OutcomeCompleted {
		t.Fatalf("owner idle past its lease within its timeout: %+v, %v; want completed", o.resp, o.err)
	}
}

// Another writer that completes the key while the owner runs (a node that did not take the
// same lock) wins: the owner's completion hits the primary key, its business writes roll
// back, and it answers the winner's replay. Business writes never commit twice.
func TestAnotherWriterWinsAtCompletion(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	o := e.park(t, p, "k")
	fp, _ := Fingerprint("createThing", parts("x")...)
	if err := idemdb.New(e.pool).CompleteKey(context.Background(), idemdb.CompleteKeyParams{
		Scope: "", Key: "k", Operation: "createThing", Fingerprint: fp, ResponseStatus: pgtypeInt4(http.StatusCreated),
		ResponseHeaders: []byte(`[["Content-Type","application/json"]]`), ResponseBody: []byte(`{"winner":true}`),
		RetentionUs: time.Hour.Microseconds(),
	}); err != nil {
		t.Fatal(err)
	}
	o.finish()
	if o.err != nil || o.resp.Outcome != OutcomeReplayed || string(o.resp.Body) != `{"winner":true}` {
		t.Fatalf("owner that lost: %+v, %v; want the winner's replay", o.resp, o.err)
	}
	if e.rows("") != 0 {
		t.Fatalf("%d business rows of the losing owner survived, want 0", e.rows(""))
	}
}

// Rows left 'processing' by protocol v1 in an upgraded table: while their lease lasts the
// key answers 409 (a v1 owner may still run); once it ended, the next request takes the row
// over and executes, once. None is stuck.
func TestV1ProcessingRows(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	fp, _ := Fingerprint("createThing", parts("x")...)
	ctx := context.Background()
	for key, lease := range map[string]string{"live": "20 seconds", "ended": "-1 second"} {
		if _, err := e.pool.Exec(ctx, `INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status,
			lease_token, leased_until, expires_at) VALUES ('', $1, 'createThing', $2, 'processing', 7,
			now() + $3::interval, now() + interval '1 hour')`, key, fp, lease); err != nil {
			t.Fatal(err)
		}
	}
	r := e.do(p, "live", "x", insertOne("x"))
	if ra, _ := strconv.Atoi(header(r, "Retry-After")); r.Status != http.StatusConflict || ra < 15 || ra > 20 {
		t.Fatalf("v1 claim within its lease: %d Retry-After %q, want 409 and the lease's seconds left", r.Status, header(r, "Retry-After"))
	}
	if r := e.do(p, "ended", "x", insertOne("x")); r.Outcome != OutcomeCompleted || e.count(OutcomeTakenOver) != 1 {
		t.Fatalf("v1 claim past its lease: %s, taken over %d; want completed, 1", r.Outcome, e.count(OutcomeTakenOver))
	}
	if r := e.do(p, "ended", "x", insertOne("x")); r.Outcome != OutcomeReplayed {
		t.Fatalf("after the takeover: %s, want replayed", r.Outcome)
	}
	if got := e.int(`SELECT count(*) FROM idempotency_keys WHERE key = 'ended' AND status = 'completed'
		AND lease_token = 0 AND leased_until = completed_at`); got != 1 || e.rows("") != 1 {
		t.Fatalf("taken-over row completed without v1 columns: %d, %d business rows; want 1, 1", got, e.rows(""))
	}
}

// A COMMIT that gets no answer is an unknown outcome (ErrCommitUnknown), never "rolled
// back": when it did not land, the database rolls back as the connection goes and a retry
// executes at once; when it landed, the retry replays.
func TestCommitOutcomeUnknown(t *testing.T) {
	for _, c := range []struct {
		name    string
		mode    int32
		outcome Outcome
	}{{"not committed", 1, OutcomeCompleted}, {"committed", 2, OutcomeReplayed}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			var mode atomic.Int32
			e.faultyStore(t, &mode)
			p := policy("createThing")
			mode.Store(c.mode)
			_, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x"))
			if !errors.Is(err, ErrCommitUnknown) {
				t.Fatalf("err = %v, want ErrCommitUnknown", err)
			}
			e.waitFor("NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory')")
			if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != c.outcome || r.Status != http.StatusCreated {
				t.Fatalf("retry: %s %d, want %s 201", r.Outcome, r.Status, c.outcome)
			}
			if e.rows("") != 1 {
				t.Fatalf("%d business rows, want 1", e.rows(""))
			}
		})
	}
}

// A pool whose every connection is held does not hold requests without bound: acquiring
// a connection fails within the store's acquire timeout, wrapping ErrPoolExhausted (503
// with Retry-After), for a keyed request and for one without a key alike.
func TestPoolExhaustionIsBounded(t *testing.T) {
	url := pgtest.NewDB(t)
	pool := pgtest.PoolWithMax(t, url, 1)
	if err := Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, url: url, pool: pgtest.PoolWithMax(t, url, 4), outcomes: map[Outcome]int{}}
	if _, err := e.pool.Exec(context.Background(), `CREATE TABLE business (
		id bigserial PRIMARY KEY, scope text NOT NULL, key text, payload text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	e.store = NewStore(pool, WithAcquireTimeout(200*time.Millisecond))
	o := e.park(t, policy("createThing"), "k")
	// A keyed request, and one without a key under a policy that allows that (its plain
	// transaction acquires the same way).
	keyless := policy("createThing")
	keyless.KeyRequired = false
	for _, c := range []struct {
		name string
		p    *Policy
		key  *string
	}{{"keyed", policy("createThing"), ptr("other")}, {"keyless", keyless, nil}} {
		start := time.Now()
		_, err := e.store.Do(context.Background(), c.p, c.key, parts("x"), insertOne("x"))
		if took := time.Since(start); err == nil || took > 5*time.Second {
			t.Fatalf("%s: a request on a full pool: %v after %s; want an acquire error within the timeout", c.name, err, took)
		}
		if !errors.Is(err, ErrPoolExhausted) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: a request on a full pool: %v; want ErrPoolExhausted wrapping the acquire's deadline", c.name, err)
		}
		w := httptest.NewRecorder()
		NewResponseErrorHandler(func(*http.Request, error) {})(w, httptest.NewRequest("POST", "/x", nil), &DoError{Err: err})
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("%s: a request on a full pool answered %d, Retry-After %q; want 503 with Retry-After: 1", c.name, w.Code, w.Header().Get("Retry-After"))
		}
	}
	o.finish()
	if o.err != nil || o.resp.Outcome != OutcomeCompleted {
		t.Fatalf("owner: %+v, %v", o.resp, o.err)
	}
	if resp, err := e.store.Do(context.Background(), keyless, nil, parts("y"), insertOne("y")); err != nil || resp.Outcome != OutcomeUnkeyed {
		t.Fatalf("a keyless request once the pool is free: %+v, %v", resp, err)
	}
}

// HeldClaims and StaleClaims read the claims held now from the database's views: the
// parked owner's, marked stale once it is older than the stale age.
func TestHeldAndStaleClaims(t *testing.T) {
	e := newEnv(t, WithStaleAfter(time.Second))
	p := policy("createThing")
	ctx := context.Background()
	if n, err := e.store.StaleClaims(ctx); err != nil || n != 0 {
		t.Fatalf("StaleClaims with no owner: %d, %v", n, err)
	}
	o := e.park(t, p, "k")
	held, err := e.store.HeldClaims(ctx)
	// Stale exactly when held for the stale age (1s) or longer: on a loaded machine the
	// first read may already come that late.
	if err != nil || len(held) != 1 || held[0].PID != o.pid || held[0].LockID != LockID("", "k") || held[0].Stale != (held[0].Held >= time.Second) {
		t.Fatalf("HeldClaims: %+v, %v; want the owner's claim (pid %d), stale only past 1s", held, err, o.pid)
	}
	e.waitFor("now() - xact_start > interval '1.2 seconds' FROM pg_stat_activity WHERE pid = $1", o.pid)
	if n, err := e.store.StaleClaims(ctx); err != nil || n != 1 {
		t.Fatalf("StaleClaims past the stale age: %d, %v; want 1", n, err)
	}
	if held, err := e.store.HeldClaims(ctx); err != nil || len(held) != 1 || !held[0].Stale {
		t.Fatalf("HeldClaims past the stale age: %+v, %v; want 1, stale", held, err)
	}
	o.finish()
	if n, err := e.store.StaleClaims(ctx); err != nil || n != 0 {
		t.Fatalf("StaleClaims after the owner finished: %d, %v; want 0", n, err)
	}
}

func pgtypeInt4(v int32) pgtype.Int4 { return pgtype.Int4{Int32: v, Valid: true} }

// Concurrent retries of a completed key all replay, under every isolation: a replay that
// holds the key's lock for its read does not make the others 409.
func TestConcurrentReplays(t *testing.T) {
	for _, iso := range []pgx.TxIsoLevel{"", pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso)+"_", func(t *testing.T) {
			e := newEnv(t)
			p := policy("createThing")
			p.Isolation = iso
			if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
				t.Fatalf("first: %s", r.Outcome)
			}
			const n = 30
			resps := make([]*Response, n)
			release(n, func(i int) { resps[i], _ = e.store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x")) })
			for i, r := range resps {
				if r == nil || r.Outcome != OutcomeReplayed {
					t.Fatalf("concurrent retry %d: %+v, want a replay", i, r)
				}
			}
		})
	}
}
