package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// raise40001 fails the statement (and so the transaction) with a serialization failure.
const raise40001 = `DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'conflict'; END $$`

// When every retry of the business transaction hits a serialization failure, the call fails
// and the claim is released: a retry runs at once instead of waiting out the lease.
func TestSerializationRetriesExhaustedReleases(t *testing.T) {
	for _, retries := range []int{0, 2} {
		e := newEnv(t, WithMaxRetries(retries))
		p := policy("createThing")
		var calls atomic.Int64
		always := func(ctx context.Context, tx Tx) (*Response, error) {
			calls.Add(1)
			if _, err := insertOne("x")(ctx, tx); err != nil {
				return nil, err
			}
			_, err := tx.Exec(ctx, raise40001)
			return nil, err
		}
		_, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), always)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "40001" {
			t.Fatalf("retries %d: err = %v, want the serialization failure", retries, err)
		}
		if calls.Load() != int64(retries+1) || e.count(OutcomeRetried) != retries {
			t.Fatalf("retries %d: business ran %d times, retried %d", retries, calls.Load(), e.count(OutcomeRetried))
		}
		if e.rows("") != 0 || e.keyRows() != 0 || e.count(OutcomeReleased) != 1 || e.count(OutcomeFailed) != 1 {
			t.Fatalf("retries %d: %d business rows, %d keys, released %d, failed %d; want 0, 0, 1, 1",
				retries, e.rows(""), e.keyRows(), e.count(OutcomeReleased), e.count(OutcomeFailed))
		}
		if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
			t.Fatalf("retries %d: retry after the failure: %s, want completed", retries, r.Outcome)
		}
	}
}

// Under REPEATABLE READ or SERIALIZABLE, a reclaim that commits while the owner's lock of
// its own row waits makes that lock fail with 40001 (concurrent update). The owner has lost
// its claim: it runs no business and answers 409 lease_lost, not a server error.
func TestLeaseLostWhileLockingUnderSerializable(t *testing.T) {
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			e := newEnv(t)
			p := policy("createThing")
			p.Isolation = iso
			claimed, resume := make(chan struct{}), make(chan struct{})
			resumeOnce := sync.OnceFunc(func() { close(resume) })
			t.Cleanup(resumeOnce) // a failed test does not leave the owner parked
			e.store.hookClaimed = func() {
				close(claimed)
				<-resume
			}
			var ran atomic.Int64
			counting := func(ctx context.Context, tx Tx) (*Response, error) {
				ran.Add(1)
				return insertOne("x")(ctx, tx)
			}
			var owner *Response
			var ownerErr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				owner, ownerErr = e.store.Do(context.Background(), p, ptr("k"), parts("x"), counting)
			}()
			<-claimed
			// What a reclaim does to the row, held open until the owner waits on the row lock.
			ctx := context.Background()
			reclaim, err := e.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer reclaim.Rollback(ctx)
			if _, err := reclaim.Exec(ctx, `UPDATE idempotency_keys SET lease_token = lease_token + 1,
				leased_until = now() + interval '30 seconds' WHERE key = 'k'`); err != nil {
				t.Fatal(err)
			}
			resumeOnce()
			e.waitFor(`EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock' AND query LIKE '%LockOwnKey%')`)
			if err := reclaim.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			<-done
			if ownerErr != nil || owner == nil || owner.Outcome != OutcomeLeaseLost || owner.Status != http.StatusConflict {
				t.Fatalf("owner: %+v, %v; want 409 lease_lost", owner, ownerErr)
			}
			if ran.Load() != 0 || e.rows("") != 0 || e.keyRows() != 1 {
				t.Fatalf("business ran %d times, %d rows, %d keys; want 0, 0, 1", ran.Load(), e.rows(""), e.keyRows())
			}
		})
	}
}

// A panicking business function rolls back and releases the claim (the process lives on:
// net/http recovers the panic), then the panic continues up the stack.
func TestBusinessPanicReleases(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	boom := func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := insertOne("x")(ctx, tx); err != nil {
			return nil, err
		}
		panic("boom")
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the business panic", r)
			}
		}()
		_, _ = e.store.Do(context.Background(), p, ptr("k"), parts("x"), boom)
	}()
	if e.rows("") != 0 || e.keyRows() != 0 || e.count(OutcomeReleased) != 1 {
		t.Fatalf("after a panic: %d business rows, %d keys, released %d; want 0, 0, 1", e.rows(""), e.keyRows(), e.count(OutcomeReleased))
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
}

// A business function that returns neither a response nor an error is a business error
// (rolled back, released), keyed or not; it does not panic the protocol.
func TestBusinessNilResponse(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	nothing := func(ctx context.Context, tx Tx) (*Response, error) {
		_, err := insertOne("x")(ctx, tx)
		return nil, err
	}
	if r, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), nothing); err == nil {
		t.Fatalf("keyed: %+v, want an error", r)
	}
	optional := policy("createThing")
	optional.KeyRequired = false
	if r, err := e.store.Do(context.Background(), optional, nil, parts("x"), nothing); err == nil {
		t.Fatalf("unkeyed: %+v, want an error", r)
	}
	if e.rows("") != 0 || e.keyRows() != 0 {
		t.Fatalf("%d business rows, %d keys; want 0, 0", e.rows(""), e.keyRows())
	}
}

// A processing claim past retention whose lease is live is not taken over (its owner may be
// between claim and lock): 409, the row unchanged. Valid policies (retention ≥ lease)
// reach that state through a reclaim, which renews the lease but not the retention, e.g.
// during a deploy that lengthens the lease: call 1 (lease 1s, retention 2s) claims and is
// parked before its business transaction (an owner that is gone); past its lease and
// within its retention, call 2 (lease 30s) reclaims and is parked at the same place; past
// the retention, call 3 finds the row expired with a live lease.
func TestExpiredClaimWithLiveLeaseIsNotTakenOver(t *testing.T) {
	e := newEnv(t)
	old, p := policy("createThing"), policy("createThing")
	old.Lease, old.Retention = time.Second, 2*time.Second
	p.Lease, p.Retention = 30*time.Second, 30*time.Second
	parked := []chan struct{}{make(chan struct{}), make(chan struct{})}
	resume := make(chan struct{})
	resumeOnce := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(resumeOnce) // a failed test does not leave the owners parked
	var claims atomic.Int32
	e.store.hookClaimed = func() {
		if n := claims.Add(1); n <= 2 {
			close(parked[n-1])
			<-resume
		}
	}
	owners := make([]*Response, 2)
	var wg sync.WaitGroup
	for i, pol := range []*Policy{old, p} {
		if i == 1 {
			e.waitFor("leased_until <= now() FROM idempotency_keys WHERE key = 'k'")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			owners[i], _ = e.store.Do(context.Background(), pol, ptr("k"), parts("x"), insertOne("x"))
		}()
		<-parked[i]
	}
	e.waitFor("expires_at <= now() FROM idempotency_keys WHERE key = 'k'")
	var token int64
	var pastRetention, leaseLive bool
	if err := e.pool.QueryRow(context.Background(),
		"SELECT lease_token, expires_at <= now(), leased_until > now() FROM idempotency_keys").Scan(&token, &pastRetention, &leaseLive); err != nil {
		t.Fatal(err)
	}
	if e.count(OutcomeReclaimed) != 1 || !pastRetention || !leaseLive {
		t.Fatalf("reclaimed %d, past retention %v, lease live %v: want 1, true, true (call 2 came past call 1's retention?)",
			e.count(OutcomeReclaimed), pastRetention, leaseLive)
	}
	r := e.do(p, "k", "x", insertOne("x"))
	var after int64
	if err := e.pool.QueryRow(context.Background(), "SELECT lease_token FROM idempotency_keys").Scan(&after); err != nil || after != token {
		t.Fatalf("lease token %d -> %d (%v): the rejection changed the row", token, after, err)
	}
	resumeOnce()
	wg.Wait()
	if r.Status != http.StatusConflict || r.Outcome != OutcomeInProgress || e.count(OutcomeTakenOver) != 0 {
		t.Fatalf("duplicate: %d %s, taken over %d; want 409 in_progress, 0", r.Status, r.Outcome, e.count(OutcomeTakenOver))
	}
	if owners[0] == nil || owners[0].Outcome != OutcomeLeaseLost || owners[1] == nil || owners[1].Outcome != OutcomeCompleted || e.rows("") != 1 {
		t.Fatalf("first owner %+v, reclaimer %+v, %d rows; want lease_lost, completed, 1", owners[0], owners[1], e.rows(""))
	}
}

// commitFault is a connection that, when armed, loses the link at the transaction's
// COMMIT: mode 1 drops the COMMIT unsent (the server rolls back when it sees the link go),
// mode 2 sends it first (the server commits). Either way the client gets no answer.
type commitFault struct {
	net.Conn
	mode *atomic.Int32
}

func (c *commitFault) Write(b []byte) (int, error) {
	if m := c.mode.Load(); m != 0 && executesCommit(b) && c.mode.CompareAndSwap(m, 0) {
		if m == 2 {
			_, _ = c.Conn.Write(b)
		}
		_ = c.Conn.Close()
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// preparedCommit is the name of the prepared statement pgx makes of "commit" (Conn.Prepare
// by SQL: "stmt_" and a digest), executeMsg the start of an Execute message.
var (
	preparedCommit = func() []byte {
		d := sha256.Sum256([]byte("commit"))
		return []byte("stmt_" + hex.EncodeToString(d[:24]))
	}()
	executeMsg = []byte("E\x00\x00\x00\x09\x00")
)

// executesCommit reports whether the client's write b runs a COMMIT: an Execute of the
// unnamed statement "commit" or of pgx's prepared one (preparing it runs nothing).
func executesCommit(b []byte) bool {
	return bytes.Contains(b, executeMsg) && (bytes.Contains(b, []byte("commit\x00")) || bytes.Contains(b, preparedCommit))
}

// faultyStore replaces e.store by a store whose connections lose the link at COMMIT when
// mode is set.
func (e *env) faultyStore(t *testing.T, mode *atomic.Int32) {
	cfg := e.pool.Config()
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &commitFault{Conn: conn, mode: mode}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.store = NewStore(pool, WithObserver(func(_ string, o Outcome) {
		e.mu.Lock()
		e.outcomes[o]++
		e.mu.Unlock()
	}))
}

// A COMMIT that gets no answer leaves the claim in place: the call fails with
// ErrCommitUnknown, and retries then see the truth. When the commit did not land, retries
// get 409 until the lease ends and one reclaims and executes; when it landed, they replay.
func TestAmbiguousCommitIsNotReleased(t *testing.T) {
	t.Run("not committed", func(t *testing.T) {
		e := newEnv(t)
		var mode atomic.Int32
		e.faultyStore(t, &mode)
		p := policy("createThing")
		p.Lease = time.Second
		mode.Store(1)
		_, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x"))
		if !errors.Is(err, ErrCommitUnknown) {
			t.Fatalf("err = %v, want ErrCommitUnknown", err)
		}
		if e.count(OutcomeReleased) != 0 || e.keyRows() != 1 {
			t.Fatalf("released %d, %d keys; want the claim kept", e.count(OutcomeReleased), e.keyRows())
		}
		if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeInProgress {
			t.Fatalf("retry within the lease: %s, want in_progress", r.Outcome)
		}
		e.waitFor("leased_until <= now() FROM idempotency_keys WHERE key = 'k'")
		e.waitFor("NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%')")
		if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
			t.Fatalf("retry after the lease: %s, want completed", r.Outcome)
		}
		if e.rows("") != 1 || e.count(OutcomeReclaimed) != 1 {
			t.Fatalf("%d business rows, reclaimed %d; want 1, 1", e.rows(""), e.count(OutcomeReclaimed))
		}
	})
	t.Run("committed", func(t *testing.T) {
		e := newEnv(t)
		var mode atomic.Int32
		e.faultyStore(t, &mode)
		p := policy("createThing")
		mode.Store(2)
		_, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x"))
		if !errors.Is(err, ErrCommitUnknown) {
			t.Fatalf("err = %v, want ErrCommitUnknown", err)
		}
		if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeReplayed || r.Status != http.StatusCreated {
			t.Fatalf("retry: %s %d, want a replay of the committed 201", r.Outcome, r.Status)
		}
		if e.rows("") != 1 {
			t.Fatalf("%d business rows, want 1", e.rows(""))
		}
	})
}

// Retry-After never exceeds this operation's lease, even when the claim was taken under a
// longer one (a policy changed between deploys).
func TestRetryAfterClampedToLease(t *testing.T) {
	e := newEnv(t)
	long := policy("createThing")
	long.Lease = time.Minute
	claimed, resume := make(chan struct{}), make(chan struct{})
	resumeOnce := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(resumeOnce) // a failed test does not leave the owner parked
	var first atomic.Bool
	e.store.hookClaimed = func() {
		if first.CompareAndSwap(false, true) {
			close(claimed)
			<-resume
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.store.Do(context.Background(), long, ptr("k"), parts("x"), insertOne("x"))
	}()
	<-claimed
	short := policy("createThing")
	short.Lease = 2 * time.Second
	rs := e.do(short, "k", "x", insertOne("x"))
	rl := e.do(long, "k", "x", insertOne("x"))
	bounded := policy("createThing")
	bounded.Lease, bounded.Timeout = time.Minute, 5*time.Second
	rb := e.do(bounded, "k", "x", insertOne("x"))
	resumeOnce()
	<-done
	if rs.Status != http.StatusConflict || header(rs, "Retry-After") != "2" {
		t.Fatalf("short lease: %d Retry-After %q, want 409 and 2", rs.Status, header(rs, "Retry-After"))
	}
	if ra, _ := strconv.Atoi(header(rl, "Retry-After")); rl.Status != http.StatusConflict || ra < 50 || ra > 60 {
		t.Fatalf("long lease: %d Retry-After %q, want 409 and the seconds left (about 60)", rl.Status, header(rl, "Retry-After"))
	}
	if rb.Status != http.StatusConflict || header(rb, "Retry-After") != "5" {
		t.Fatalf("lease with a 5s timeout: %d Retry-After %q, want 409 and 5", rb.Status, header(rb, "Retry-After"))
	}
}

// The client going away after the business function returned does not undo it: the
// completion and COMMIT run under a context the request's cancellation cannot reach.
func TestClientCancelAfterBusinessCommits(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	thenGone := func(ctx context.Context, tx Tx) (*Response, error) {
		r, err := insertOne("x")(ctx, tx)
		cancel()
		return r, err
	}
	r, err := e.store.Do(ctx, p, ptr("k"), parts("x"), thenGone)
	if err != nil || r.Outcome != OutcomeCompleted {
		t.Fatalf("%+v, %v; want completed", r, err)
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeReplayed || e.rows("") != 1 {
		t.Fatalf("retry: %s with %d rows, want a replay and 1", r.Outcome, e.rows(""))
	}
}

// The guards in the SQL itself, for the races the Go code cannot see (the row changed
// between the read and the write): a takeover needs an expired row, a reclaim a processing
// row past its lease, a release our token on a processing row.
func TestQueryGuards(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := e.store.q
	fp, _ := Fingerprint("createThing", parts("x")...)
	lease, retention := time.Minute.Microseconds(), time.Hour.Microseconds()
	const token = 41
	if _, err := q.ClaimKey(ctx, idemdb.ClaimKeyParams{Scope: "", Key: "k", Operation: "createThing", Fingerprint: fp, LeaseToken: token, LeaseUs: lease, RetentionUs: retention}); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if _, err := q.TakeOverExpired(ctx, idemdb.TakeOverExpiredParams{Key: "k", Operation: "createThing", Fingerprint: fp, LeaseToken: 42, LeaseUs: lease, RetentionUs: retention}); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("takeover of an unexpired row: %v, want no row", err)
	}
	if _, err := q.ReclaimKey(ctx, idemdb.ReclaimKeyParams{Key: "k", Operation: "createThing", Fingerprint: fp, LeaseToken: 42, LeaseUs: lease}); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("reclaim of a live lease: %v, want no row", err)
	}
	if n, err := q.ReleaseKey(ctx, idemdb.ReleaseKeyParams{Key: "k", LeaseToken: token + 1}); err != nil || n != 0 {
		t.Fatalf("release with another token: %d rows, %v; want 0", n, err)
	}
	if _, err := e.pool.Exec(ctx, "UPDATE idempotency_keys SET leased_until = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	other, _ := Fingerprint("createThing", parts("y")...)
	if _, err := q.ReclaimKey(ctx, idemdb.ReclaimKeyParams{Key: "k", Operation: "createThing", Fingerprint: other, LeaseToken: 42, LeaseUs: lease}); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("reclaim with another payload: %v, want no row", err)
	}
	if _, err := q.ReclaimKey(ctx, idemdb.ReclaimKeyParams{Key: "k", Operation: "createThing", Fingerprint: fp, LeaseToken: 42, LeaseUs: lease}); err != nil {
		t.Fatalf("reclaim past the lease: %v", err)
	}
	if n, err := q.ReleaseKey(ctx, idemdb.ReleaseKeyParams{Key: "k", LeaseToken: token}); err != nil || n != 0 || e.keyRows() != 1 {
		t.Fatalf("release with the reclaimed token: %d rows, %v, %d keys; want 0, 1 key", n, err, e.keyRows())
	}
}

// With no retries left, a lock that fails because the claim was reclaimed meanwhile fails
// the call, and its release, fenced by the old token, leaves the reclaimer's row alone.
func TestLockFailureReleaseIsFenced(t *testing.T) {
	e := newEnv(t, WithMaxRetries(0))
	p := policy("createThing")
	p.Isolation = pgx.RepeatableRead
	claimed, resume := make(chan struct{}), make(chan struct{})
	resumeOnce := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(resumeOnce)
	e.store.hookClaimed = func() {
		close(claimed)
		<-resume
	}
	done := make(chan error)
	go func() {
		_, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x"))
		done <- err
	}()
	<-claimed
	ctx := context.Background()
	reclaim, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reclaim.Rollback(ctx)
	var token int64
	if err := reclaim.QueryRow(ctx, `UPDATE idempotency_keys SET lease_token = lease_token + 1,
		leased_until = now() + interval '30 seconds' WHERE key = 'k' RETURNING lease_token`).Scan(&token); err != nil {
		t.Fatal(err)
	}
	resumeOnce()
	e.waitFor(`EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
		AND wait_event_type = 'Lock' AND query LIKE '%LockOwnKey%')`)
	if err := reclaim.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the fenced owner succeeded")
	}
	var after int64
	if err := e.pool.QueryRow(ctx, "SELECT lease_token FROM idempotency_keys WHERE key = 'k' AND status = 'processing'").Scan(&after); err != nil || after != token {
		t.Fatalf("reclaimer's claim: token %d, %v; want %d intact", after, err, token)
	}
	if e.rows("") != 0 {
		t.Fatalf("%d business rows, want 0", e.rows(""))
	}
}
