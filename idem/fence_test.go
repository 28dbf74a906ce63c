package idem

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// The fencing token alone refuses a stale owner's lock: the owner, paused between its
// claim and its lock, lost the lease to a retry that reclaimed the key and is itself
// paused before its lock. The row is the same (scope, key), still processing; only the
// token differs. The stale owner runs no business and answers 409; the retry executes.
func TestFencingTokenAloneRefusesLock(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Lease = time.Second
	pause := []chan struct{}{make(chan struct{}), make(chan struct{})}
	resume := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var resumeAll sync.Once
	t.Cleanup(func() { // a failed test does not leave the owners parked
		resumeAll.Do(func() {
			for _, r := range resume {
				close(r)
			}
		})
	})
	var claims atomic.Int64
	e.store.hookClaimed = func() {
		i := claims.Add(1) - 1
		close(pause[i])
		<-resume[i]
	}
	var ran atomic.Int64
	counting := func(ctx context.Context, tx Tx) (*Response, error) {
		ran.Add(1)
		return insertOne("x")(ctx, tx)
	}
	resps := make([]*Response, 2)
	errs := make([]error, 2)
	done := []chan struct{}{make(chan struct{}), make(chan struct{})}
	do := func(i int) {
		defer close(done[i])
		resps[i], errs[i] = e.store.Do(context.Background(), p, ptr("k"), parts("x"), counting)
	}
	go do(0)
	<-pause[0]
	e.waitFor("leased_until <= now() FROM idempotency_keys WHERE key = 'k'")
	go do(1)
	<-pause[1]
	if e.count(OutcomeReclaimed) != 1 {
		t.Fatalf("reclaimed %d, want 1", e.count(OutcomeReclaimed))
	}
	close(resume[0])
	<-done[0]
	close(resume[1])
	<-done[1]
	resumeAll.Do(func() {})
	if errs[0] != nil || resps[0].Outcome != OutcomeLeaseLost || resps[0].Status != http.StatusConflict {
		t.Fatalf("stale owner: %+v, %v; want 409 lease_lost", resps[0], errs[0])
	}
	if errs[1] != nil || resps[1].Outcome != OutcomeCompleted {
		t.Fatalf("reclaiming retry: %+v, %v; want completed", resps[1], errs[1])
	}
	if ran.Load() != 1 || e.rows("") != 1 {
		t.Fatalf("business ran %d times, %d rows; want 1, 1", ran.Load(), e.rows(""))
	}
}

// Each fenced statement of the business transaction (the own-row lock and the completion,
// by primary key and by ctid) refuses a token other than the row's, with everything else
// right: the same scope and key, the row's current ctid, status processing. With the
// row's token it succeeds.
func TestFencedStatementsRefuseAnotherToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fp, _ := Fingerprint("createThing", parts("x")...)
	const token, other = 41, 42
	rowID, err := e.store.q.ClaimKey(ctx, idemdb.ClaimKeyParams{Scope: "s", Key: "k", Operation: "createThing",
		Fingerprint: fp, LeaseToken: token, LeaseUs: time.Minute.Microseconds(), RetentionUs: time.Hour.Microseconds()})
	if err != nil {
		t.Fatal(err)
	}
	status := pgtype.Int4{Int32: 201, Valid: true}
	for _, c := range []struct {
		name string
		st   func(token int64) idemdb.Statement
	}{
		{"LockOwnKey", func(tok int64) idemdb.Statement {
			return idemdb.LockOwnKeyParams{Scope: "s", Key: "k", LeaseToken: tok}.Statement()
		}},
		{"LockOwnKeyAt", func(tok int64) idemdb.Statement {
			return idemdb.LockOwnKeyAtParams{RowID: rowID, Scope: "s", Key: "k", LeaseToken: tok}.Statement()
		}},
		{"CompleteKey", func(tok int64) idemdb.Statement {
			return idemdb.CompleteKeyParams{Scope: "s", Key: "k", LeaseToken: tok, ResponseStatus: status,
				ResponseHeaders: []byte("[]"), ResponseBody: []byte{}, RetentionUs: 1}.Statement()
		}},
		{"CompleteKeyAt", func(tok int64) idemdb.Statement {
			return idemdb.CompleteKeyAtParams{RowID: rowID, Scope: "s", Key: "k", LeaseToken: tok, ResponseStatus: status,
				ResponseHeaders: []byte("[]"), ResponseBody: []byte{}, RetentionUs: 1}.Statement()
		}},
	} {
		// run sends the statement in a transaction it rolls back: the row stays as claimed.
		run := func(tok int64) error {
			tx, err := e.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			st := c.st(tok)
			var got int64
			return tx.QueryRow(ctx, st.SQL, st.Args...).Scan(&got)
		}
		if err := run(other); !errors.Is(err, pgx.ErrNoRows) && !fenceFailed(err) {
			t.Errorf("%s with another token: %v, want no row or the fence error", c.name, err)
		}
		if err := run(token); err != nil {
			t.Errorf("%s with the row's token: %v", c.name, err)
		}
	}
}
