package idem

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgembed"
)

// The claim's commit does not wait for its WAL flush; these tests crash PostgreSQL right
// after claims to show what that may lose, and that it is only ever claims whose request
// committed nothing. A crash is a kill -9 of a PostgreSQL process: the postmaster then
// resets shared memory, WAL buffers included, and runs crash recovery. The WAL writer is
// stopped (SIGSTOP) from before the claims until the crash, so nothing but a commit that
// waits for its flush moves the claims' WAL to disk. The cluster is durable (fsync,
// synchronous_commit on) and has no autovacuum (whose commits would flush too).
func TestCrashAfterClaims(t *testing.T) {
	ctx := context.Background()
	c, err := pgembed.Start(ctx, pgembed.Options{Durable: true, Settings: map[string]string{"autovacuum": "off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })

	// Claims whose WAL no commit flushed are lost: their requests committed nothing, and a
	// retry executes at once (no claim blocks it). Completed requests all replay.
	t.Run("unflushed claims are lost", func(t *testing.T) {
		e, ce := crashEnv(t, c)
		completed := ce.complete(3)
		ce.stopWALWriter()
		owners := ce.hold(4)
		ce.crash()
		owners.wait()
		ce.checkReplays(completed)
		if n := e.keyRows() - len(completed); n != 0 || e.rows("") != len(completed) {
			t.Fatalf("after the crash: %d of %d claims left, %d business rows; want 0 (their WAL never reached disk), %d",
				n, len(owners.keys), e.rows(""), len(completed))
		}
		for _, key := range owners.keys {
			if r := e.do(ce.p, key, "x", insertOne("x")); r.Outcome != OutcomeCompleted {
				t.Fatalf("retry of %s: %s, want an execution", key, r.Outcome)
			}
		}
		ce.checkReplays(owners.keys)
		ce.exactlyOnce()
	})

	// A commit that waits for its flush (here: another request's business COMMIT) makes
	// every claim before it durable. The claims survive the crash as processing rows:
	// retries get 409 until the lease ends, then one reclaims and executes. Never a replay
	// from a row that is not completed.
	t.Run("a later commit flushes earlier claims", func(t *testing.T) {
		e, ce := crashEnv(t, c)
		ce.stopWALWriter()
		owners := ce.hold(4)
		completed := ce.complete(1)
		ce.crash()
		owners.wait()
		ce.checkReplays(completed)
		if n := e.int(`SELECT count(*) FROM idempotency_keys WHERE status = 'processing'`); n != len(owners.keys) || e.rows("") != 1 {
			t.Fatalf("after the crash: %d processing claims, %d business rows; want %d (flushed by the later commit), 1",
				n, e.rows(""), len(owners.keys))
		}
		// A retry answers 409 while the lease lasts (recovery may outlast it), then one
		// reclaims and executes.
		var waiting []string
		for _, key := range owners.keys {
			switch r := e.do(ce.p, key, "x", insertOne("x")); r.Outcome {
			case OutcomeInProgress:
				waiting = append(waiting, key)
			case OutcomeCompleted:
			default:
				t.Fatalf("retry of %s: %d %s, want 409 or (past the lease) an execution", key, r.Status, r.Outcome)
			}
		}
		e.waitFor("coalesce(bool_and(leased_until <= now()), true) FROM idempotency_keys WHERE status = 'processing'")
		for _, key := range waiting {
			if r := e.do(ce.p, key, "x", insertOne("x")); r.Outcome != OutcomeCompleted {
				t.Fatalf("retry of %s past the lease: %s, want an execution", key, r.Outcome)
			}
		}
		if e.count(OutcomeReclaimed) != len(owners.keys) {
			t.Fatalf("reclaimed %d, want %d", e.count(OutcomeReclaimed), len(owners.keys))
		}
		ce.checkReplays(owners.keys)
		ce.exactlyOnce()
	})
}

// crashTest is one crash scenario's database on the durable cluster.
type crashTest struct {
	t       *testing.T
	c       *pgembed.Cluster
	e       *env
	p       *Policy
	bodies  map[string][]byte // the answer of each key that completed
	seq     int
	stopped int // the stopped WAL writer's pid
}

func crashEnv(t *testing.T, c *pgembed.Cluster) (*env, *crashTest) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("crash_%d", time.Now().UnixNano())
	admin, err := pgxpool.New(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, c.DatabaseURL(name))
	p := policy("createThing")
	p.Lease = 2 * time.Second
	return e, &crashTest{t: t, c: c, e: e, p: p, bodies: map[string][]byte{}}
}

// complete runs n fresh requests to completion and returns their keys.
func (ce *crashTest) complete(n int) []string {
	ce.t.Helper()
	var keys []string
	for range n {
		ce.seq++
		key := fmt.Sprintf("done-%d", ce.seq)
		r := ce.e.do(ce.p, key, "x", insertOne("x"))
		if r.Outcome != OutcomeCompleted {
			ce.t.Fatalf("%s: %s, want completed", key, r.Outcome)
		}
		ce.bodies[key] = r.Body
		keys = append(keys, key)
	}
	return keys
}

// stopWALWriter stops PostgreSQL's WAL writer until the crash.
func (ce *crashTest) stopWALWriter() {
	ce.t.Helper()
	ce.stopped = ce.e.int(`SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'`)
	if err := syscall.Kill(ce.stopped, syscall.SIGSTOP); err != nil {
		ce.t.Fatalf("stopping the WAL writer (pid %d): %v", ce.stopped, err)
	}
	ce.t.Cleanup(func() { _ = syscall.Kill(ce.stopped, syscall.SIGCONT) })
}

// owners are requests held inside their business functions, their claims committed.
type owners struct {
	keys    []string
	release chan struct{}
	done    sync.WaitGroup
	t       *testing.T
	resps   []*Response
	errs    []error
}

// hold starts n requests and waits until each is inside its business function, its
// business row written (not committed), and a duplicate of each is answered 409.
func (ce *crashTest) hold(n int) *owners {
	ce.t.Helper()
	o := &owners{release: make(chan struct{}), t: ce.t, resps: make([]*Response, n), errs: make([]error, n)}
	var inside sync.WaitGroup
	inside.Add(n)
	for i := range n {
		ce.seq++
		key := fmt.Sprintf("held-%d", ce.seq)
		o.keys = append(o.keys, key)
		o.done.Go(func() {
			o.resps[i], o.errs[i] = ce.e.store.Do(context.Background(), ce.p, ptr(key), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
				r, err := insertOne("x")(ctx, tx)
				inside.Done()
				<-o.release
				return r, err
			})
		})
	}
	inside.Wait()
	for _, key := range o.keys {
		if r := ce.e.do(ce.p, key, "x", insertOne("x")); r.Status != http.StatusConflict {
			ce.t.Fatalf("duplicate of %s while its owner is inside: %d %s, want 409 (the claim is visible at once)", key, r.Status, r.Outcome)
		}
	}
	return o
}

// wait lets the owners go on (their connections died with the crash) and checks that
// none of them answered with a stored response.
func (o *owners) wait() {
	o.t.Helper()
	close(o.release)
	o.done.Wait()
	for i, key := range o.keys {
		if o.errs[i] == nil && o.resps[i].Outcome == OutcomeCompleted {
			o.t.Fatalf("owner of %s completed across the crash", key)
		}
	}
}

// crash kills the stopped WAL writer with SIGKILL and waits until PostgreSQL has
// recovered and accepts connections again.
func (ce *crashTest) crash() {
	ce.t.Helper()
	if err := syscall.Kill(ce.stopped, syscall.SIGKILL); err != nil {
		ce.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var restarted bool
		err := ce.e.pool.QueryRow(ctx, `SELECT pid <> $1 FROM pg_stat_activity WHERE backend_type = 'walwriter'`, ce.stopped).Scan(&restarted)
		cancel()
		if err == nil && restarted {
			ce.e.pool.Reset() // connections opened before the crash are dead
			return
		}
		if time.Now().After(deadline) {
			ce.t.Fatalf("PostgreSQL did not come back within a minute of the crash: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkReplays asks for every key again: each replays its recorded answer byte for byte
// (or, for a key that completed after the crash, replays).
func (ce *crashTest) checkReplays(keys []string) {
	ce.t.Helper()
	for _, key := range keys {
		r := ce.e.do(ce.p, key, "x", insertOne("x"))
		if r.Outcome != OutcomeReplayed {
			ce.t.Fatalf("%s after the crash: %s, want a replay", key, r.Outcome)
		}
		if want, ok := ce.bodies[key]; ok && !bytes.Equal(r.Body, want) {
			ce.t.Fatalf("%s replays %q, answered %q before the crash", key, r.Body, want)
		}
		var status string
		if err := ce.e.pool.QueryRow(context.Background(), `SELECT status FROM idempotency_keys WHERE key = $1`, key).Scan(&status); err != nil || status != "completed" {
			ce.t.Fatalf("%s replayed from a %q row (%v)", key, status, err)
		}
	}
}

// exactlyOnce checks one business row per key and a completed key for each.
func (ce *crashTest) exactlyOnce() {
	ce.t.Helper()
	if n := ce.e.int(`SELECT count(*) FROM (SELECT key FROM business GROUP BY key HAVING count(*) > 1) d`); n != 0 {
		ce.t.Fatalf("%d keys executed more than once", n)
	}
	if n := ce.e.int(`SELECT count(*) FROM idempotency_keys k WHERE status <> 'completed'
		OR NOT EXISTS (SELECT 1 FROM business b WHERE b.key = k.key)`); n != 0 {
		ce.t.Fatalf("%d keys not completed or without their business row", n)
	}
}
