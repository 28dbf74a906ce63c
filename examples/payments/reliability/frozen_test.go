package reliability

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// idem's default deadlines, which the server processes run with.
const (
	flightTimeout  = 10 * time.Second // idem.DefaultFlightTimeout
	acquireTimeout = 5 * time.Second  // idem.DefaultAcquireTimeout
	// unmarkedTimeout is the bound the server is given (-unmarked-timeout) for its
	// operations without x-idempotent (GET /payments/{id}): shorter than the flight
	// deadline, so that a GET sent while both owners wait on the frozen link ends before
	// they do, whatever the scheduling.
	unmarkedTimeout = 3 * time.Second
	// slack is what the tests allow past a deadline (a process's scheduling on a loaded
	// machine), never a way of ordering events.
	slack = 2 * time.Second
)

// getPayment sends GET /payments/{id}, bounded by limit on the client's side (a hang shows
// as a transport error after limit).
func getPayment(base, account, id string, limit time.Duration) reply {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/payments/"+id, nil)
	req.Header.Set("X-Account-ID", account)
	return do(req)
}

// A frozen database (issue #25): a pool of 2, both owners' COMMITs land but their
// answers never come back, and the link keeps acknowledging (a frozen PgBouncer or
// database host; no FIN, no RST). The owners answer 503 "outcome unknown" at their flight
// deadline; pgx gives their connections up then, and their pool slots must come back at
// once (pgx's own close path reads the dead socket for up to 15 s more, and the pool
// waits for it). A GET sent while both slots are held ends within its bound (503 with
// Retry-After) instead of hanging; right after the owners' answers a fresh key is
// served (201) and the GET answers 200; the owners' retries replay.
func TestNetFrozenDatabase(t *testing.T) {
	url := pgtest.NewDB(t)
	fp := newFaultProxy(t, url)
	// Frozen both ways once the COMMIT has gone by: what the client sends after it (pgx's
	// Terminate) is dropped, and so is the server's answer from its CommandComplete
	// COMMIT on. The server never closes (its session waits for the next message).
	fp.add(cut(t, "cut", "downstream", `^COMMIT$`, `"backend": true`, `"limit": 2`))
	fp.add(cut(t, "freeze", "upstream", `^commit$`, `"after": true`, `"limit": 2`))
	// And the GETs' statement blackholed on its way (armed later, on its own switch).
	getArm := t.Name() + "/get"
	fp.add(fmt.Sprintf(`{"name": "get", "type": "pgcut", "stream": "upstream", "attributes": {"match": "name: GetPayment ", "limit": 2, "arm": %q}}`, getArm))
	srv := startPayments(t, "replica", fp.url, "-max-conns", "2", "-unmarked-timeout", unmarkedTimeout.String())
	d := openDB(t, url)
	const account = "acct-frozen"
	var tl tally
	probe := pay(context.Background(), srv.url, account, "probe")
	tl.add(probe)
	if !probe.executed() {
		t.Fatalf("the service does not work through the proxy before any fault: %s", probe)
	}
	arm(t, t.Name())

	var wg sync.WaitGroup
	owners := make([]reply, 2)
	took := make([]time.Duration, 2)
	for i := range owners {
		wg.Go(func() {
			start := time.Now()
			owners[i] = pay(context.Background(), srv.url, account, fmt.Sprintf("own-%d", i))
			took[i] = time.Since(start)
		})
	}
	// Both COMMITs landed and their answers are lost: both pool slots wait on the frozen link.
	d.waitFor(`count(*) = 2 FROM idempotency_keys WHERE key IN ('own-0', 'own-1') AND status = 'completed'`, 30*time.Second)

	start := time.Now()
	during := getPayment(srv.url, account, probe.paymentID(), 20*time.Second)
	duringTook := time.Since(start)
	if during.err != nil || during.status != http.StatusServiceUnavailable || during.header.Get("Retry-After") == "" {
		t.Errorf("a GET while both slots are held: %s after %v; want 503 with Retry-After within its bound %v", during, duringTook.Round(time.Millisecond), unmarkedTimeout)
	} else if duringTook > unmarkedTimeout+slack {
		t.Errorf("a GET while both slots are held took %v, past its bound %v", duringTook, unmarkedTimeout)
	}

	wg.Wait()
	for i, r := range owners {
		tl.add(r)
		if got := answerKind(r); got != "503 unknown" {
			t.Errorf("owner %d: %s (%s), want 503 unknown", i, r, got)
		}
		if took[i] > flightTimeout+slack {
			t.Errorf("owner %d answered after %v, past its flight deadline %v", i, took[i].Round(time.Millisecond), flightTimeout)
		}
	}

	// Right after the owners' answers: their slots are back.
	start = time.Now()
	fresh := pay(context.Background(), srv.url, account, "fresh")
	freshTook := time.Since(start)
	tl.add(fresh)
	if !fresh.executed() {
		t.Errorf("a fresh key right after the owners' answers: %s after %v; want 201 (the owners' slots back at their deadline)", fresh, freshTook.Round(time.Millisecond))
	} else if freshTook > slack {
		t.Errorf("a fresh key right after the owners' answers took %v: it waited for a slot", freshTook)
	}
	after := getPayment(srv.url, account, probe.paymentID(), 20*time.Second)
	if after.err != nil || after.status != http.StatusOK || after.paymentID() != probe.paymentID() {
		t.Errorf("a GET right after the owners' answers: %s; want 200 with the probe's payment", after)
	}

	fp.remove("cut")
	fp.remove("freeze")

	// Two GETs on links that freeze under their statement (both slots again): each ends at
	// its bound, 503; pgx gives their connections up, and the pool's slots are back at
	// once (idem.ConfigureConnections closes such a connection's socket when the pool
	// destroys it), so a fresh key right after is served.
	arm(t, getArm)
	gets := make([]reply, 2)
	getsTook := make([]time.Duration, 2)
	release(len(gets), func(i int) {
		start := time.Now()
		gets[i] = getPayment(srv.url, account, probe.paymentID(), 20*time.Second)
		getsTook[i] = time.Since(start)
	})
	for i, r := range gets {
		if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || getsTook[i] > unmarkedTimeout+slack {
			t.Errorf("GET %d on a frozen link: %s after %v; want 503 with Retry-After within its bound %v", i, r, getsTook[i].Round(time.Millisecond), unmarkedTimeout)
		}
	}
	start = time.Now()
	fresh2 := pay(context.Background(), srv.url, account, "fresh-2")
	fresh2Took := time.Since(start)
	tl.add(fresh2)
	if !fresh2.executed() || fresh2Took > slack {
		t.Errorf("a fresh key right after the frozen GETs: %s after %v; want 201 at once (their slots back)", fresh2, fresh2Took.Round(time.Millisecond))
	}
	fp.remove("get")

	keys := []string{"probe", "own-0", "own-1", "fresh", "fresh-2"}
	lost := 0
	for _, key := range keys {
		r := pay(context.Background(), srv.url, account, key)
		tl.add(r)
		if !r.replayed() {
			t.Errorf("key %s afterwards: %s, want a replay", key, r)
			continue
		}
		if !d.committed(key, r) {
			lost++
		}
	}
	duplicates := d.exactlyOnce(keys)
	result(t, &tl, len(keys), duplicates, lost, fmt.Sprintf("; owners answered %s after %v and %v; GET during: %s after %v; fresh key: %d after %v; frozen GETs: %s after %v and %s after %v; fresh key after them: %d after %v",
		answerKind(owners[0]), took[0].Round(time.Millisecond), took[1].Round(time.Millisecond),
		answerKind(during), duringTook.Round(time.Millisecond), fresh.status, freshTook.Round(time.Millisecond),
		answerKind(gets[0]), getsTook[0].Round(time.Millisecond), answerKind(gets[1]), getsTook[1].Round(time.Millisecond),
		fresh2.status, fresh2Took.Round(time.Millisecond)))
}
