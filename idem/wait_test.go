package idem

import (
	"context"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// With Policy.Wait, duplicates that arrive while the owner runs wait for it and replay its
// answer once it commits, whether the owner runs in this process (no connection held while
// waiting) or in another one (the wait is in the database).
func TestWaitReplaysTheOwnersAnswer(t *testing.T) {
	for _, sameProcess := range []bool{true, false} {
		name := "owner elsewhere"
		if sameProcess {
			name = "owner in this process"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			p := policy("createThing")
			p.Wait = 20 * time.Second
			o := e.park(t, p, "k")
			dupStore := e.store
			if !sameProcess {
				dupStore = NewStore(e.pool) // another replica: it knows nothing of the owner
			}
			const n = 8
			resps := make([]*Response, n)
			errs := make([]error, n)
			done := make(chan struct{})
			go func() {
				defer close(done)
				release(n, func(i int) {
					resps[i], errs[i] = dupStore.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x"))
				})
			}()
			if !sameProcess {
				// The duplicates are waiting in the database (at most a quarter of the pool's
				// 40 connections; the others poll).
				e.waitFor("count(*) >= 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
			}
			o.finish()
			<-done
			if o.err != nil || o.resp.Outcome != OutcomeCompleted {
				t.Fatalf("owner: %+v, %v", o.resp, o.err)
			}
			for i, r := range resps {
				if errs[i] != nil || r.Outcome != OutcomeReplayed || string(r.Body) != string(o.resp.Body) {
					t.Fatalf("waiting duplicate %d: %+v, %v; want the owner's replay", i, r, errs[i])
				}
			}
			if e.rows("") != 1 {
				t.Fatalf("%d business rows, want 1", e.rows(""))
			}
		})
	}
}

// A duplicate waits at most Wait: an owner still running then gets it 409 with Retry-After.
func TestWaitEndsIn409(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Wait = 300 * time.Millisecond
	o := e.park(t, p, "k")
	for _, store := range []*Store{e.store, NewStore(e.pool)} {
		start := time.Now()
		r, err := store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x"))
		took := time.Since(start)
		if err != nil || r.Status != http.StatusConflict || header(r, "Retry-After") == "" {
			t.Fatalf("duplicate past its wait: %+v, %v; want 409 with Retry-After", r, err)
		}
		// The store's wait starts inside Do, a little after start: a few ms of slack.
		if took < p.Wait-20*time.Millisecond || took > p.Wait+5*time.Second {
			t.Fatalf("the duplicate answered after %s, want about the wait (%s)", took, p.Wait)
		}
	}
	o.finish()
}

// When the owner rolls back (a business error), a waiting duplicate runs the request
// itself: exactly one execution commits.
func TestWaitRunsWhenTheOwnerRollsBack(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Wait = 20 * time.Second
	inside, fail := make(chan struct{}), make(chan struct{})
	ownerDone := make(chan error)
	go func() {
		_, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
			if _, err := insertOne("x")(ctx, tx); err != nil {
				return nil, err
			}
			close(inside)
			<-fail
			return nil, errBusiness
		})
		ownerDone <- err
	}()
	select {
	case <-inside:
	case err := <-ownerDone:
		t.Fatalf("owner ended before its business ran: %v", err)
	}
	dup := make(chan *Response)
	go func() {
		r, _ := e.store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x"))
		dup <- r
	}()
	close(fail)
	if err := <-ownerDone; err != errBusiness {
		t.Fatalf("owner: %v", err)
	}
	if r := <-dup; r == nil || r.Outcome != OutcomeCompleted {
		t.Fatalf("waiting duplicate after the owner's rollback: %+v, want an execution", r)
	}
	if e.rows("") != 1 {
		t.Fatalf("%d business rows, want 1", e.rows(""))
	}
}

// Duplicates waiting for an owner in the same process answer from the key's row the owner
// committed, without claiming again: no connection is acquired after the owner is done.
// The row still decides as a claim's read would: a duplicate with another payload gets 422.
func TestWaitingDuplicatesAnswerFromTheOwnersCommit(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Wait = 20 * time.Second
	o := e.park(t, p, "k")
	const n = 8
	resps := make([]*Response, n)
	errs := make([]error, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		release(n, func(i int) {
			payload := "x"
			if i == 0 {
				payload = "y"
			}
			resps[i], errs[i] = e.store.Do(context.Background(), p, ptr("k"), parts(payload), insertOne(payload))
		})
	}()
	id := LockID("", "k")
	deadline := time.Now().Add(10 * time.Second)
	for waiting := 0; waiting < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d duplicates waiting for the owner after 10s", waiting, n)
		}
		e.store.owners.mu.Lock()
		if ow := e.store.owners.keys[id]; ow != nil {
			waiting = ow.waiting
		}
		e.store.owners.mu.Unlock()
		runtime.Gosched()
	}
	before := e.pool.Stat().AcquireCount()
	o.finish()
	<-done
	if acquired := e.pool.Stat().AcquireCount() - before; acquired != 0 {
		t.Errorf("%d connections acquired after the owner committed; want 0 (the waiters answer from its row)", acquired)
	}
	if o.err != nil || o.resp.Outcome != OutcomeCompleted {
		t.Fatalf("owner: %+v, %v", o.resp, o.err)
	}
	if r := resps[0]; errs[0] != nil || r.Status != http.StatusUnprocessableEntity {
		t.Errorf("waiting duplicate with another payload: %+v, %v; want 422", r, errs[0])
	}
	for i, r := range resps[1:] {
		if errs[i+1] != nil || r.Outcome != OutcomeReplayed || string(r.Body) != string(o.resp.Body) ||
			r.Status != o.resp.Status || header(r, "Content-Type") != header(o.resp, "Content-Type") {
			t.Fatalf("waiting duplicate %d: %+v, %v; want the owner's replay", i+1, r, errs[i+1])
		}
	}
	if e.rows("") != 1 {
		t.Fatalf("%d business rows, want 1", e.rows(""))
	}
}
