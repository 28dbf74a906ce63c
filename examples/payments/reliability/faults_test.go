package reliability

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/internal/pgbouncer"
	"github.com/idemgen/idemgen/internal/pgembed"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// result logs the line RELIABILITY.md quotes. duplicates is from db.exactlyOnce; lost
// counts 2xx answers without their committed payment (db.committed).
func result(t *testing.T, tl *tally, keys, duplicates, lost int, extra string) {
	t.Helper()
	verdict := "PASS"
	if t.Failed() {
		verdict = "FAIL"
	}
	t.Logf("RESULT %s %s: %d keys; %s; duplicates: %d, lost: %d%s", t.Name(), verdict, keys, tl, duplicates, lost, extra)
}

// Three replicas of the server on one database. Each key's 9 duplicates are released
// together, 3 to each replica, 10 keys at a time; a duplicate answered 409 retries (on
// its replica) until it gets the stored answer. Exactly one execution per key, every
// other answer a byte-identical replay, one payment per key.
func TestReplicasOneExecutionPerKey(t *testing.T) {
	url := pgtest.NewDB(t)
	replicaDuplicates(t, url, url)
}

// The same, with the replicas reaching PostgreSQL through PgBouncer in transaction
// pooling mode (pgx default_query_exec_mode=exec; see internal/pgbouncer).
func TestReplicasBehindPgBouncer(t *testing.T) {
	b := pgbouncer.ForTest(t, pgtest.URL(t), pgbouncer.Options{PoolSize: 10})
	direct := pgtest.NewDB(t)
	via, err := b.Via(direct, pgbouncer.ExecMode)
	if err != nil {
		t.Fatal(err)
	}
	replicaDuplicates(t, via, direct)
}

func replicaDuplicates(t *testing.T, serverURL, checkURL string) {
	reps := []*proc{
		startPayments(t, "replica-1", serverURL, "-delay", "20ms"),
		startPayments(t, "replica-2", serverURL, "-delay", "20ms"),
		startPayments(t, "replica-3", serverURL, "-delay", "20ms"),
	}
	d := openDB(t, checkURL)
	const keys, dups, wave = 60, 9, 10
	const account = "acct-replicas"
	var tl tally
	final := make([][]reply, keys)
	for k := range final {
		final[k] = make([]reply, dups)
	}
	var firstExec [keys]atomic.Int32 // executions per key, over every attempt
	for w := 0; w < keys; w += wave {
		release(wave*dups, func(i int) {
			k, dup := w+i/dups, i%dups
			key := fmt.Sprintf("rep-%03d", k)
			base := reps[dup%len(reps)].url
			for attempt := 0; ; attempt++ {
				r := pay(context.Background(), base, account, key)
				tl.add(r)
				if r.executed() {
					firstExec[k].Add(1)
				}
				if r.err != nil || r.status != http.StatusConflict || attempt == 500 {
					final[k][dup] = r
					return
				}
				time.Sleep(10 * time.Millisecond) // client backoff
			}
		})
	}
	names := make([]string, keys)
	lost := 0
	for k := range keys {
		key := fmt.Sprintf("rep-%03d", k)
		names[k] = key
		if n := firstExec[k].Load(); n != 1 {
			t.Errorf("key %s executed %d times, want 1", key, n)
		}
		var body string
		for dup, r := range final[k] {
			if r.err != nil || r.status != http.StatusCreated {
				t.Errorf("key %s duplicate %d: final answer %s, want 201", key, dup, r)
				continue
			}
			if body == "" {
				body = string(r.body)
				if !d.committed(key, r) {
					lost++
				}
			} else if string(r.body) != body {
				t.Errorf("key %s: answers differ:\n%s\n%s", key, body, r.body)
			}
		}
	}
	duplicates := d.exactlyOnce(names)
	if tl.executed != keys || tl.server+tl.transport+tl.other != 0 {
		t.Errorf("%s; want exactly %d executions and no failures", &tl, keys)
	}
	result(t, &tl, keys, duplicates, lost, "")
}

// A replica is killed (SIGKILL) while it holds 8 requests inside their business
// transactions. Their clients get transport errors; PostgreSQL rolls the transactions back
// as their connections close, and with them the claims (transaction-scoped locks): no key
// is left behind, none waits for a lease. Retries on the other replicas, released
// together right away, execute each key exactly once.
func TestKillReplicaInFlight(t *testing.T) {
	url := pgtest.NewDB(t)
	victim := startPayments(t, "victim", url, "-delay", "60s")
	others := []*proc{startPayments(t, "replica-2", url), startPayments(t, "replica-3", url)}
	bases := []string{others[0].url, others[1].url}
	d := openDB(t, url)
	const n, dups = 8, 6
	const account = "acct-kill"
	var tl tally
	keys := make([]string, n)
	inflight := make(chan reply, n)
	for i := range n {
		keys[i] = fmt.Sprintf("kill-%d", i)
		go func() { inflight <- pay(context.Background(), victim.url, account, keys[i]) }()
	}
	d.waitFor(inBusiness(n), 30*time.Second)
	if got := d.int(`SELECT count(*) ` + claimsHeld); got != n {
		t.Fatalf("%d claims held by the owners, want %d", got, n)
	}
	victim.kill9()
	killed := time.Now()
	for range n {
		r := <-inflight
		tl.add(r)
		if r.err == nil {
			t.Errorf("a request in flight on the killed replica was answered: %s", r)
		}
	}
	d.waitFor(`NOT EXISTS (SELECT 1 `+claimsHeld+`)`, 30*time.Second)
	freed := time.Since(killed)
	if freed > shortLease {
		t.Errorf("the killed owners' claims were freed %v after the kill, past the lease (%v)", freed, shortLease)
	}
	if got := d.int(`SELECT count(*) FROM idempotency_keys`); got != 0 {
		t.Fatalf("%d key rows after the kill, want 0 (nothing of the owners committed)", got)
	}
	if got := d.int(`SELECT count(*) FROM payments`); got != 0 {
		t.Fatalf("%d payments of the killed replica are visible, want 0 (rolled back)", got)
	}
	stale := 0
	var executions [n]atomic.Int32
	var mu sync.Mutex
	answers := map[string]string{}
	lost := 0
	release(n*dups, func(i int) {
		key := keys[i/dups]
		r, err := untilDone(bases[i%2:], account, key, &tl, 30*time.Second)
		if err != nil {
			t.Error(err)
			return
		}
		if r.executed() {
			executions[i/dups].Add(1)
		}
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := answers[key]; ok && prev != string(r.body) {
			t.Errorf("key %s: two different answers:\n%s\n%s", key, prev, r.body)
		}
		answers[key] = string(r.body)
	})
	for i, key := range keys {
		if got := executions[i].Load(); got != 1 {
			t.Errorf("key %s executed %d times after the kill, want 1", key, got)
		}
		if !d.committed(key, reply{status: 201, body: []byte(answers[key])}) {
			lost++
		}
	}
	duplicates := d.exactlyOnce(keys)
	result(t, &tl, n, duplicates, lost, fmt.Sprintf("; claims freed %v after the kill, %d stale", freed.Round(time.Millisecond), stale))
}

// The database connections of five owners are terminated (pg_terminate_backend) while
// they are inside their business transactions, after inserting their payment. Each
// owner's next statement (its completion) fails: it rolls back, releases its claim, and
// answers 500, logging the termination (SQLSTATE 57P01) as the cause. The retry (on
// another replica) executes exactly once; the one after it replays.
//
// The owners' replica is the server's handler in-process (as in badinput_test.go), so
// that its downstream call is a gate the test holds: the owners stay in their business
// transactions until their backends have been terminated and have exited, however slow
// the machine. (A fixed delay raced the terminations under load: an owner whose delay ran
// out first completed, and fewer backends were terminated.)
func TestOwnerConnectionTerminated(t *testing.T) {
	url := pgtest.NewDB(t)
	fast := startPayments(t, "replica-2", url) // applies the schemas
	gate := newDownstreamGate(t)
	logs := &lockedLines{}
	srv := startInProcess(t, url, service.Options{Downstream: gate.call, Logf: logs.add})
	d := openDB(t, url)
	const n = 5
	const account = "acct-terminate"
	var tl tally
	keys := make([]string, n)
	first := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		keys[i] = fmt.Sprintf("term-%d", i)
		wg.Go(func() { first[i] = pay(context.Background(), srv, account, keys[i]) })
	}
	gate.waitArrived(n, 60*time.Second)
	// Every owner is now held in its downstream call: idle in transaction after its
	// InsertPayment, until the gate opens.
	if got := d.int(`SELECT count(*) ` + ownersInBusiness); got != n {
		t.Fatalf("%d owners idle in their business transactions while held, want %d", got, n)
	}
	var pids []int32
	rows, err := d.pool.Query(context.Background(), `WITH owners AS MATERIALIZED (SELECT pid `+ownersInBusiness+`)
		SELECT pid FROM owners WHERE pg_terminate_backend(pid)`)
	if err == nil {
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != n {
		t.Fatalf("terminated %d backends, want %d", len(pids), n)
	}
	// pg_terminate_backend only signals: open the gate once the backends have exited, so
	// that each owner's next statement meets a closed connection.
	d.waitFor(`NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1))`, 30*time.Second, pids)
	gate.open()
	wg.Wait()
	for i, r := range first {
		tl.add(r)
		if r.err != nil || r.status != http.StatusInternalServerError || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("owner of %s whose connection was terminated: %s, want a 500 problem", keys[i], r)
		}
	}
	if got := logs.count("SQLSTATE 57P01"); got != n {
		t.Errorf("%d of the owners' 500s were logged with the termination (SQLSTATE 57P01) as cause, want %d; log:\n%s", got, n, logs)
	}
	if p, k := d.int(`SELECT count(*) FROM payments`), d.int(`SELECT count(*) FROM idempotency_keys`); p != 0 || k != 0 {
		t.Fatalf("after the terminations: %d payments, %d keys; want 0, 0 (rolled back, released)", p, k)
	}
	lost := 0
	for _, key := range keys {
		r := pay(context.Background(), fast.url, account, key)
		tl.add(r)
		if !r.executed() || r.status != http.StatusCreated {
			t.Errorf("retry of %s: %s, want an execution (201)", key, r)
			continue
		}
		if !d.committed(key, r) {
			lost++
		}
		again := pay(context.Background(), srv, account, key)
		tl.add(again)
		if !again.replayed() || string(again.body) != string(r.body) {
			t.Errorf("second retry of %s: %s, want a replay of %s", key, again, r.body)
		}
	}
	if got := gate.arrivals(); got != n {
		t.Errorf("%d downstream calls on the owners' replica, want %d (the owners only)", got, n)
	}
	duplicates := d.exactlyOnce(keys)
	result(t, &tl, n, duplicates, lost, "")
}

// PostgreSQL is restarted (fast shutdown), then crashed (SIGQUIT, crash recovery on
// start), while 8 clients send payments through two replicas, each client retrying a key
// until it gets a 2xx, then moving to its next key. Requests fail cleanly during the
// outages (5xx problem or transport error, never a 2xx without a committed row); the
// pools reconnect; every key completes; none executes twice.
func TestPostgresRestartUnderLoad(t *testing.T) {
	c := restartableCluster(t)
	restartUnderLoad(t, c, c.URL())
}

// The same with the replicas reaching PostgreSQL through PgBouncer (transaction pooling,
// exec mode), which keeps the clients' connections while the server goes away and logs
// in again once it is back.
func TestPostgresRestartBehindPgBouncer(t *testing.T) {
	pgbouncer.Require(t)
	c := restartableCluster(t)
	b := pgbouncer.ForTest(t, c.URL(), pgbouncer.Options{PoolSize: 10})
	via, err := b.Via(c.URL(), pgbouncer.ExecMode)
	if err != nil {
		t.Fatal(err)
	}
	restartUnderLoad(t, c, via)
}

// restartableCluster starts a cluster of the test's own, to restart and crash.
// synchronous_commit=on: a crash must not lose an acknowledged commit (pgembed's default,
// off, trades that for speed).
func restartableCluster(t *testing.T) *pgembed.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgembed.Start(ctx, pgembed.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func restartUnderLoad(t *testing.T, c *pgembed.Cluster, serverURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := c.URL()
	reps := []*proc{startPayments(t, "replica-1", serverURL, "-delay", "20ms"), startPayments(t, "replica-2", serverURL, "-delay", "20ms")}
	bases := []string{reps[0].url, reps[1].url}
	d := openDB(t, url)
	var tl tally
	probe := pay(context.Background(), bases[0], "acct-probe", "probe-1")
	tl.add(probe)
	if !probe.executed() {
		t.Fatalf("the service does not work in this setup before any fault: %s", probe)
	}
	const workers = 8
	const account = "acct-restart"
	var completed atomic.Int64
	var stop atomic.Bool
	var mu sync.Mutex
	done := map[string]reply{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := 0; !stop.Load(); k++ {
				key := fmt.Sprintf("restart-%d-%d", w, k)
				r, err := untilDone(bases[w%2:], account, key, &tl, 60*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				done[key] = r
				mu.Unlock()
				completed.Add(1)
			}
		})
	}
	waitCompleted := func(n int64) {
		deadline := time.Now().Add(60 * time.Second)
		for completed.Load() < n {
			if time.Now().After(deadline) {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("stuck at %d completed keys, waiting for %d", completed.Load(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCompleted(50)
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	afterRestart := completed.Load()
	waitCompleted(afterRestart + 80)
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.StartAgain(ctx); err != nil {
		t.Fatal(err)
	}
	afterCrash := completed.Load()
	waitCompleted(afterCrash + 80)
	stop.Store(true)
	wg.Wait()
	d.pool.Reset() // the checks' connections opened before the crash are dead

	keys := []string{"probe-1"}
	lost, retried, replayed := 0, 0, 0
	for key, r := range done {
		keys = append(keys, key)
		if !d.committed(key, r) {
			lost++
		}
		if r.attempts > 1 {
			retried++
		}
		if r.replayed() {
			replayed++ // its commit landed but the answer was lost
		}
	}
	duplicates := d.exactlyOnce(keys)
	if tl.other != 0 {
		t.Errorf("unexpected answers (first: %s)", tl.firstOther)
	}
	if tl.server+tl.transport == 0 {
		t.Errorf("no request failed during the outages: the restarts did not happen under load")
	}
	result(t, &tl, len(keys), duplicates, lost, fmt.Sprintf("; %d keys needed retries (%d of them completed by a replay); completed keys before the restart %d, before the crash %d", retried, replayed, afterRestart, afterCrash))
}

// A business run slower than its lease but alive and within its timeout (delay 5s, lease
// 3s, timeout 6s) keeps its claim: duplicates sent the whole time to two other replicas
// get 409 (never an execution), including a burst of 12 released together after the
// owner's transaction has run longer than the lease on the database clock; the owner is
// not cut off (its idle bound is the timeout + 1s) and completes once.
func TestSlowOwnerPastLease(t *testing.T) {
	url := pgtest.NewDB(t)
	slow := startPayments(t, "slow", url, "-delay", slowDelay.String())
	others := []*proc{startPayments(t, "replica-2", url), startPayments(t, "replica-3", url)}
	d := openDB(t, url)
	const account, key = "acct-slow", "slow-1"
	var tl tally
	ownerDone := make(chan reply, 1)
	go func() { ownerDone <- pay(context.Background(), slow.url, account, key) }()
	d.waitFor(inBusiness(1), 30*time.Second)

	// Duplicates the whole time, back to back, until the owner has answered.
	var background tally
	var stopDup atomic.Bool
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			for !stopDup.Load() {
				r := pay(context.Background(), others[i].url, account, key)
				background.add(r)
				if r.executed() {
					t.Errorf("a duplicate executed while the owner was alive: %s", r)
				}
				time.Sleep(20 * time.Millisecond) // client backoff
			}
		})
	}
	d.waitFor(fmt.Sprintf(`EXISTS (SELECT 1 %s AND now() - xact_start > interval '%d seconds')`, ownersInBusiness, int(shortLease.Seconds())), 30*time.Second)
	burst := make([]reply, 12)
	release(len(burst), func(i int) { burst[i] = pay(context.Background(), others[i%2].url, account, key) })
	if d.int(`SELECT count(*) `+ownersInBusiness) != 1 {
		t.Fatalf("the owner left its transaction before the burst was answered: the machine is too slow for this test (lease %v, delay %v)", shortLease, slowDelay)
	}
	for _, r := range burst {
		tl.add(r)
		if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); r.err != nil || r.status != http.StatusConflict || ra < 1 || ra > int(shortTimeout.Seconds()) {
			t.Errorf("duplicate past the lease while the owner is alive: %s (Retry-After %q), want 409 with Retry-After 1..%d", r, r.header.Get("Retry-After"), int(shortTimeout.Seconds()))
		}
	}
	owner := <-ownerDone
	stopDup.Store(true)
	wg.Wait()
	tl.add(owner)
	if !owner.executed() || owner.status != http.StatusCreated {
		t.Fatalf("owner: %s, want 201", owner)
	}
	lost := 0
	if !d.committed(key, owner) {
		lost++
	}
	after := pay(context.Background(), others[0].url, account, key)
	tl.add(after)
	if !after.replayed() || string(after.body) != string(owner.body) {
		t.Errorf("after completion: %s, want a replay", after)
	}
	duplicates := d.exactlyOnce([]string{key})
	if background.executed != 0 || background.other+background.server+background.transport != 0 {
		t.Errorf("background duplicates: %s", &background)
	}
	result(t, &tl, 1, duplicates, lost, fmt.Sprintf("; plus background duplicates during the run: %s", &background))
}

// A business run past the operation's timeout (delay 30s, timeout 6s) is cancelled,
// rolled back and its claim released: its client gets a 500 problem after about the
// timeout, a duplicate during the run gets 409, and the retry then executes once.
func TestBusinessPastTimeout(t *testing.T) {
	url := pgtest.NewDB(t)
	slow := startPayments(t, "slow", url, "-delay", "30s")
	fast := startPayments(t, "replica-2", url)
	d := openDB(t, url)
	const account, key = "acct-timeout", "timeout-1"
	var tl tally
	start := time.Now()
	ownerDone := make(chan reply, 1)
	go func() { ownerDone <- pay(context.Background(), slow.url, account, key) }()
	d.waitFor(inBusiness(1), 30*time.Second)
	dup := pay(context.Background(), fast.url, account, key)
	tl.add(dup)
	if dup.status != http.StatusConflict {
		t.Errorf("duplicate during the run: %s, want 409", dup)
	}
	owner := <-ownerDone
	took := time.Since(start)
	tl.add(owner)
	if owner.err != nil || owner.status != http.StatusInternalServerError {
		t.Fatalf("owner past its timeout: %s, want a 500 problem", owner)
	}
	if took < shortTimeout-time.Second || took > 25*time.Second {
		t.Errorf("the owner answered after %v; want about the timeout, %v", took, shortTimeout)
	}
	if p, k := d.int(`SELECT count(*) FROM payments`), d.int(`SELECT count(*) FROM idempotency_keys`); p != 0 || k != 0 {
		t.Fatalf("after the timeout: %d payments, %d keys; want 0, 0 (rolled back, released)", p, k)
	}
	retry := pay(context.Background(), fast.url, account, key)
	tl.add(retry)
	if !retry.executed() || retry.status != http.StatusCreated {
		t.Fatalf("retry: %s, want an execution", retry)
	}
	lost := 0
	if !d.committed(key, retry) {
		lost++
	}
	duplicates := d.exactlyOnce([]string{key})
	result(t, &tl, 1, duplicates, lost, fmt.Sprintf("; the owner was answered after %v", took.Round(100*time.Millisecond)))
}
