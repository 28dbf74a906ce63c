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

// A crash of PostgreSQL (kill -9 of a backend: the postmaster resets shared memory and
// runs crash recovery) while owners are inside their business transactions: their claims
// were never committed (the key's lock is transaction-scoped and its row is born
// completed), so nothing of them survives, and each retry executes at once, exactly once.
// Every request completed before the crash replays. The cluster is durable (fsync,
// synchronous_commit on) and has no autovacuum.
func TestCrashWithOwnersInFlight(t *testing.T) {
	ctx := context.Background()
	c, err := pgembed.Start(ctx, pgembed.Options{Durable: true, Settings: map[string]string{"autovacuum": "off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	e, ce := crashEnv(t, c)
	completed := ce.complete(3)
	owners := ce.hold(4)
	ce.crash()
	owners.wait()
	ce.checkReplays(completed)
	if n := e.keyRows() - len(completed); n != 0 || e.rows("") != len(completed) {
		t.Fatalf("after the crash: %d of %d in-flight keys left rows, %d business rows; want 0, %d",
			n, len(owners.keys), e.rows(""), len(completed))
	}
	for _, key := range owners.keys {
		if r := e.do(ce.p, key, "x", insertOne("x")); r.Outcome != OutcomeCompleted {
			t.Fatalf("retry of %s: %d %s, want an execution at once", key, r.Status, r.Outcome)
		}
	}
	ce.checkReplays(owners.keys)
	ce.exactlyOnce()
}

// crashTest is one crash scenario's database on the durable cluster.
type crashTest struct {
	t       *testing.T
	c       *pgembed.Cluster
	e       *env
	p       *Policy
	bodies  map[string][]byte // the answer of each key that completed
	seq     int
	stopped int // the killed WAL writer's pid
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

// crash kills PostgreSQL's WAL writer with SIGKILL (the postmaster then resets every
// backend and runs crash recovery) and waits until it accepts connections again.
func (ce *crashTest) crash() {
	ce.t.Helper()
	if err := ce.e.pool.QueryRow(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'`).Scan(&ce.stopped); err != nil {
		ce.t.Fatal(err)
	}
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
