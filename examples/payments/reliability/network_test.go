package reliability

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// The network between the service and PostgreSQL misbehaves, through toxiproxy (as a Go
// library, pgtoxic_test.go's pgcut toxic cutting the link on a given PostgreSQL
// message). The server processes run the short policies (lease 3s, timeout 6s: an idle
// bound of 7s) and idem's default deadlines (acquire 5s, each flight 10s), so a request
// ends within 5 + 10 + 6 + 10 = 31s.
const requestBound = 31 * time.Second

// idleBound is how long PostgreSQL lets a silent owner's transaction idle: max(lease,
// timeout + 1s) of the short policies.
const idleBound = shortTimeout + time.Second

// netFault runs one request whose link is cut by the toxic, and checks what the issue
// asks of it: its answer (want, within requestBound), the key blocked no longer than the
// idle bound after the cut (plus slack), then a retry that settles it (an execution or a
// replay, as wantRetry), exactly once in the database.
func netFault(t *testing.T, toxic, want string, wantRetry func(reply) bool) {
	url := pgtest.NewDB(t)
	fp := newFaultProxy(t, url)
	fp.add(toxic)
	srv := startPayments(t, "replica", fp.url)
	d := openDB(t, url)
	var tl tally
	const account = "acct-net"
	if probe := pay(context.Background(), srv.url, account, "probe"); !probe.executed() {
		t.Fatalf("the service does not work through the proxy before any fault: %s", probe)
	}
	arm(t, t.Name())
	start := time.Now()
	r := pay(context.Background(), srv.url, account, "cut-1")
	took := time.Since(start)
	tl.add(r)
	fp.remove("cut")
	if took > requestBound {
		t.Errorf("the cut request took %v, past its bound %v", took, requestBound)
	}
	if got := answerKind(r); got != want {
		t.Errorf("the cut request: %s (%s), want %s", r, got, want)
	}
	// Retries until one settles the key: 409s while the orphaned transaction lives.
	settled, err := untilDone([]string{srv.url}, account, "cut-1", &tl, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	blocked := time.Since(start)
	if !wantRetry(settled) {
		t.Errorf("the retry that settled the key: %s", settled)
	}
	if blocked > took+idleBound+5*time.Second {
		t.Errorf("the key was blocked %v after the cut (the request ended after %v): past the idle bound %v", blocked, took, idleBound)
	}
	other := pay(context.Background(), srv.url, account, "after")
	tl.add(other)
	if !other.executed() {
		t.Errorf("a request after the fault: %s", other)
	}
	lost := 0
	for key, rp := range map[string]reply{"cut-1": settled, "after": other} {
		if !d.committed(key, rp) {
			lost++
		}
	}
	duplicates := d.exactlyOnce([]string{"probe", "cut-1", "after"})
	result(t, &tl, 3, duplicates, lost, fmt.Sprintf("; the cut request answered %s after %v, its key settled %v after the cut",
		answerKind(r), took.Round(time.Millisecond), blocked.Round(time.Millisecond)))
}

// answerKind names a reply: "503 unknown" (the commit outcome unknown), "500", "201", ...
func answerKind(r reply) string {
	switch {
	case r.err != nil:
		return "transport error"
	case r.status == http.StatusServiceUnavailable && strings.Contains(string(r.body), "unknown"):
		return "503 unknown"
	}
	return fmt.Sprint(r.status)
}

// The completion flight (the key's row and COMMIT) blackholed on its way to the server
// (the link from the server still works): the server never gets the COMMIT, and cuts the
// orphaned transaction off at the idle bound, telling the client so (25P03, "terminating
// connection due to idle-in-transaction timeout"). The request is answered 500, rolled
// back, after the idle bound, which is right: the server said the transaction ended
// without its COMMIT. The key is free from then on; the retry executes, once.
func TestNetBlackholeAtCompletion(t *testing.T) {
	netFault(t, cut(t, "cut", "upstream", `^commit$`), "500", reply.executed)
}

// The business statement (the payment's INSERT) blackholed: it never reaches the server.
// The business times out (6s) and the request is answered 500, rolled back; the retry
// executes once.
func TestNetBlackholeAtBusinessStatement(t *testing.T) {
	netFault(t, cut(t, "cut", "upstream", `INSERT INTO payments`), "500", reply.executed)
}

// The business statement runs and is answered, then the link to the server is
// blackholed: the completion flight never arrives; as at the completion, the server cuts
// the transaction off at the idle bound and says so: 500, rolled back; one execution.
func TestNetBlackholeAfterBusinessStatement(t *testing.T) {
	netFault(t, cut(t, "cut", "upstream", `INSERT INTO payments`, `"after": true`), "500", reply.executed)
}

// The COMMIT runs but its answer is lost (the server's CommandComplete COMMIT and all
// after it blackholed): "outcome unknown" at the flight deadline; the retry replays the
// committed payment.
func TestNetCommitReplyLost(t *testing.T) {
	netFault(t, cut(t, "cut", "downstream", `^COMMIT$`, `"backend": true`), "503 unknown", reply.replayed)
}

// The link is closed on the COMMIT's answer (toxiproxy sends a RST only from its own
// reset_peer toxic; this one closes): "outcome unknown" at once, and the retry replays.
func TestNetClosedOnCommitReply(t *testing.T) {
	netFault(t, cut(t, "cut", "downstream", `^COMMIT$`, `"backend": true`, `"close": true`), "503 unknown", reply.replayed)
}

// 200 ms of latency each way under 16 clients sending duplicates: every key executes
// exactly once, every answer is a 201, a replay or a 409.
func TestNetLatencyUnderLoad(t *testing.T) {
	url := pgtest.NewDB(t)
	fp := newFaultProxy(t, url)
	srv := startPayments(t, "replica", fp.url)
	d := openDB(t, url)
	fp.add(`{"name": "up", "type": "latency", "stream": "upstream", "attributes": {"latency": 200}}`)
	fp.add(`{"name": "down", "type": "latency", "stream": "downstream", "attributes": {"latency": 200}}`)
	const clients, keys = 16, 8
	var tl tally
	answers := make([]reply, clients)
	release(clients, func(i int) {
		r, err := untilDone([]string{srv.url}, "acct-lat", fmt.Sprintf("lat-%d", i%keys), &tl, 60*time.Second)
		if err != nil {
			t.Error(err)
		}
		answers[i] = r
	})
	lost := 0
	var keyList []string
	for k := range keys {
		key := fmt.Sprintf("lat-%d", k)
		keyList = append(keyList, key)
		if !d.committed(key, answers[k]) {
			lost++
		}
	}
	duplicates := d.exactlyOnce(keyList)
	if tl.other+tl.server+tl.transport != 0 {
		t.Errorf("answers other than 201, replays and 409: %s", &tl)
	}
	result(t, &tl, keys, duplicates, lost, "; 200ms each way")
}

// The pool (2 connections) exhausted by two blackholed connections: other requests are
// answered within the acquire timeout (never held without bound), and once the
// blackholed owners' business times out the service serves again; every key executes
// once.
func TestNetPoolExhaustion(t *testing.T) {
	url := pgtest.NewDB(t)
	fp := newFaultProxy(t, url)
	fp.add(cut(t, "cut", "upstream", `INSERT INTO payments`, `"limit": 2`))
	srv := startPayments(t, "replica", fp.url, "-max-conns", "2")
	d := openDB(t, url)
	var tl tally
	if probe := pay(context.Background(), srv.url, "acct-pool", "probe"); !probe.executed() {
		t.Fatalf("the service does not work through the proxy before any fault: %s", probe)
	}
	arm(t, t.Name())
	var wg sync.WaitGroup
	stuck := make([]reply, 2)
	for i := range stuck {
		wg.Go(func() { stuck[i] = pay(context.Background(), srv.url, "acct-pool", fmt.Sprintf("stuck-%d", i)) })
	}
	d.waitFor(`count(*) = 2 FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`, 30*time.Second)
	start := time.Now()
	during := pay(context.Background(), srv.url, "acct-pool", "during")
	tl.add(during)
	if took := time.Since(start); took > requestBound {
		t.Errorf("a request during the exhaustion took %v, past its bound", took)
	}
	if during.err != nil || during.status != http.StatusServiceUnavailable || during.header.Get("Retry-After") == "" {
		t.Errorf("a request during the exhaustion: %s; want 503 with Retry-After (no connection was free: nothing ran)", during)
	}
	wg.Wait()
	fp.remove("cut")
	for _, r := range stuck {
		tl.add(r)
	}
	keys := []string{"probe", "stuck-0", "stuck-1", "during"}
	lost := 0
	for _, key := range keys[1:] {
		r, err := untilDone([]string{srv.url}, "acct-pool", key, &tl, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !d.committed(key, r) {
			lost++
		}
	}
	duplicates := d.exactlyOnce(keys)
	result(t, &tl, len(keys), duplicates, lost, fmt.Sprintf("; during the exhaustion: %s", answerKind(during)))
}
