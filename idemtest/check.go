package idemtest

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ReplayedHeader marks a replayed answer (idem.ReplayedHeader).
const ReplayedHeader = "Idempotent-Replayed"

// Operation is one operation marked x-idempotent, as a test sends it to the service's
// own handler. The key is read from a header (a key in the body is not covered).
type Operation struct {
	// Handler is the service's whole handler, as production serves it: authentication,
	// validation (idemvalidate), the generated router and the store.
	Handler http.Handler
	// Method and Path are the request line: "POST", "/orders" (a concrete path, with its
	// parameters filled in and, if needed, a query).
	Method, Path string
	// Header is sent with every request: Content-Type, authentication (what the scope
	// function reads).
	Header http.Header
	// Body is a valid request body the business completes with a 2xx. Every check sends it
	// under keys of its own, so it must be acceptable more than once.
	Body string
	// OtherBody is another valid request body: the same key with it is a 422.
	OtherBody string
	// KeyHeader is the key's header; "" means Idempotency-Key.
	KeyHeader string
	// KeyRequired is the marker's required: a request without a key is a 400. (An
	// operation whose key is optional runs keyless requests unprotected; they are not
	// checked.)
	KeyRequired bool
	// InvalidKeys are more keys the spec refuses with a 400 (one over the declared
	// maxLength, one off its pattern), checked with those any key refuses (over 255
	// bytes, not printable ASCII, two values).
	InvalidKeys []string
	// Gate is the business's gate (see [Gate]): it counts the runs and lets the checks
	// hold a run in flight and fail one. Without it the in-flight and business-error
	// checks skip.
	Gate *Gate
	// Runs returns how many times the business has run and committed so far, e.g. a
	// count(*) of the rows it inserts; nil means Gate.Runs (every run, committed or
	// not). One of Runs and Gate is required.
	Runs func(tb testing.TB) int
	// Duplicates is how many identical requests the duplicates check releases together;
	// 0 means 10.
	Duplicates int
	// Wait is true when the operation's marker has wait: a duplicate of a request in
	// flight waits for it and gets its replay instead of a 409.
	Wait bool
}

// CheckOperation runs, against op.Handler behind a real HTTP server, the behaviour the
// idempotency protocol promises a client, each as a subtest with keys of its own:
//
//   - duplicates: op.Duplicates identical requests released together (a barrier) run the
//     business once; one answer is the fresh 2xx, each other one its byte-identical
//     replay (Idempotent-Replayed: true) or a 409;
//   - replay: a retry after the answer gets the same status and the same bytes, with
//     Idempotent-Replayed: true, and runs nothing;
//   - other payload: the same key with op.OtherBody is a 422 and runs nothing;
//   - in flight (with a Gate): a duplicate of a request held in its business is a 409
//     with Retry-After (with op.Wait: the held request's replay);
//   - keys: a missing key (when required), keys over 255 bytes, not printable ASCII,
//     sent twice, and op.InvalidKeys are 400s and run nothing;
//   - business error (with a Gate): a run that fails is a 5xx, and its key is released:
//     the retry with that key runs and answers fresh.
//
// It checks HTTP behaviour only, whatever the store does inside.
func CheckOperation(t *testing.T, op Operation) {
	t.Helper()
	if op.Handler == nil || op.Method == "" || op.Path == "" || op.Body == "" || op.OtherBody == "" {
		t.Fatal("idemtest: Operation needs Handler, Method, Path, Body and OtherBody")
	}
	if op.Runs == nil && op.Gate == nil {
		t.Fatal("idemtest: Operation needs Runs or Gate, to count the business's runs")
	}
	if op.KeyHeader == "" {
		op.KeyHeader = "Idempotency-Key"
	}
	if op.Duplicates <= 0 {
		op.Duplicates = 10
	}
	srv := httptest.NewServer(op.Handler)
	defer srv.Close()
	c := &checker{op: op, url: srv.URL, prefix: "idemtest-" + randomHex(6)}
	t.Run("duplicates released together run once", c.duplicates)
	t.Run("a retry replays byte for byte", c.replay)
	t.Run("another payload under the key is 422", c.otherPayload)
	t.Run("a duplicate in flight is 409", c.inFlight)
	t.Run("missing and invalid keys are 400", c.keys)
	t.Run("a business error releases the key", c.businessError)
}

type checker struct {
	op     Operation
	url    string
	prefix string
	mu     sync.Mutex
	n      int
}

// answer is one response, read whole.
type answer struct {
	status int
	header http.Header
	body   string
	err    error
}

func (a answer) replayed() bool { return a.header.Get(ReplayedHeader) == "true" }

func (a answer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	body := a.body
	if len(body) > 300 {
		body = body[:300] + "..."
	}
	return http.StatusText(a.status) + " (" + strconv.Itoa(a.status) + ") " + body
}

func (c *checker) key() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.prefix + "-" + strconv.Itoa(c.n)
}

// send sends the operation with body and the key header values (none: no key).
func (c *checker) send(body string, keys ...string) answer {
	req, err := http.NewRequest(c.op.Method, c.url+c.op.Path, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	for k, vs := range c.op.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	for _, k := range keys {
		req.Header.Add(c.op.KeyHeader, k)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

func (c *checker) runs(t *testing.T) int {
	t.Helper()
	if c.op.Runs != nil {
		return c.op.Runs(t)
	}
	return c.op.Gate.Runs()
}

// fresh sends Body under key and fails t unless the answer is a fresh 2xx.
func (c *checker) fresh(t *testing.T, key string) answer {
	t.Helper()
	a := c.send(c.op.Body, key)
	if a.err != nil || a.status < 200 || a.status > 299 || a.replayed() {
		t.Fatalf("%s %s with a new key: %v, want a fresh 2xx (Body must be a request the business completes)", c.op.Method, c.op.Path, a)
	}
	return a
}

func (c *checker) duplicates(t *testing.T) {
	before := c.runs(t)
	key := c.key()
	n := c.op.Duplicates
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	answers := make([]answer, n)
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			answers[i] = c.send(c.op.Body, key)
		}()
	}
	ready.Wait()
	close(start) // the barrier: every request leaves at once
	done.Wait()

	var first *answer
	fresh, replays, conflicts := 0, 0, 0
	for i := range answers {
		a := &answers[i]
		switch {
		case a.err == nil && a.status >= 200 && a.status <= 299 && !a.replayed():
			fresh++
			first = a
		case a.err == nil && a.status >= 200 && a.status <= 299:
			replays++
		case a.err == nil && a.status == http.StatusConflict:
			conflicts++
		default:
			t.Errorf("a duplicate got %v, want the fresh 2xx, its replay or a 409", *a)
		}
	}
	if fresh != 1 {
		t.Errorf("%d fresh answers among %d duplicates (%d replays, %d 409s), want exactly 1", fresh, n, replays, conflicts)
	}
	if first != nil {
		for _, a := range answers {
			if a.err == nil && a.replayed() && (a.status != first.status || a.body != first.body) {
				t.Errorf("a replay differs from the fresh answer:\n  replay: %v\n  fresh:  %v", a, *first)
			}
		}
	}
	if d := c.runs(t) - before; d != 1 {
		t.Errorf("the business ran %d times for %d duplicates released together, want 1", d, n)
	}
	t.Logf("%d duplicates: 1 run; %d fresh, %d replays, %d 409s", n, fresh, replays, conflicts)
}

func (c *checker) replay(t *testing.T) {
	before := c.runs(t)
	key := c.key()
	first := c.fresh(t, key)
	again := c.send(c.op.Body, key)
	switch {
	case again.err != nil || again.status != first.status || again.body != first.body:
		t.Errorf("retry: %v\nwant the first answer byte for byte: %v", again, first)
	case !again.replayed():
		t.Errorf("retry: no %s: true header (headers %v)", ReplayedHeader, again.header)
	case again.header.Get("Content-Type") != first.header.Get("Content-Type"):
		t.Errorf("retry: Content-Type %q, the first answer's was %q", again.header.Get("Content-Type"), first.header.Get("Content-Type"))
	}
	if d := c.runs(t) - before; d != 1 {
		t.Errorf("the business ran %d times for a request and its retry, want 1", d)
	}
}

func (c *checker) otherPayload(t *testing.T) {
	before := c.runs(t)
	key := c.key()
	c.fresh(t, key)
	if a := c.send(c.op.OtherBody, key); a.err != nil || a.status != http.StatusUnprocessableEntity {
		t.Errorf("the key again with OtherBody: %v, want 422 (OtherBody must be valid and differ from Body)", a)
	}
	if d := c.runs(t) - before; d != 1 {
		t.Errorf("the business ran %d times, want 1 (not for the other payload)", d)
	}
}

func (c *checker) inFlight(t *testing.T) {
	g := c.op.Gate
	if g == nil {
		t.Skip("no Operation.Gate: a request cannot be held in flight")
	}
	before := c.runs(t)
	key := c.key()
	entered, release := g.hold()
	defer release()
	held := make(chan answer, 1)
	go func() { held <- c.send(c.op.Body, key) }()
	select {
	case <-entered:
	case a := <-held:
		t.Fatalf("the held request was answered before its business reached Gate.Pass: %v (does the business call Pass?)", a)
	case <-time.After(time.Minute): // a safety net, not an ordering
		t.Fatal("the business did not reach Gate.Pass within a minute")
	}
	// The duplicate must be answered (409) without running the business; with wait it
	// waits for the held request, which is released once the duplicate is on its way.
	// A duplicate whose business runs meanwhile (a second run at the gate) fails the check
	// and is released, so that nothing hangs.
	duplicate := make(chan answer, 1)
	go func() { duplicate <- c.send(c.op.Body, key) }()
	var dup answer
	if c.op.Wait {
		release()
		dup = <-duplicate
	} else {
		select {
		case dup = <-duplicate:
		case <-entered:
			t.Errorf("the business of a duplicate ran while the first request was in flight")
			release()
			dup = <-duplicate
		}
		release()
	}
	first := <-held
	if first.err != nil || first.status < 200 || first.status > 299 || first.replayed() {
		t.Fatalf("the held request, released: %v, want a fresh 2xx", first)
	}
	switch {
	case c.op.Wait && (dup.err != nil || !dup.replayed() || dup.status != first.status || dup.body != first.body):
		t.Errorf("a duplicate of a request in flight (wait): %v, want its replay: %v", dup, first)
	case !c.op.Wait && (dup.err != nil || dup.status != http.StatusConflict):
		t.Errorf("a duplicate of a request in flight: %v, want 409", dup)
	case !c.op.Wait && dup.header.Get("Retry-After") == "":
		t.Errorf("the 409 of a duplicate in flight has no Retry-After (headers %v)", dup.header)
	}
	if a := c.send(c.op.Body, key); a.err != nil || !a.replayed() || a.body != first.body {
		t.Errorf("a retry after the held request completed: %v, want its replay", a)
	}
	if d := c.runs(t) - before; d != 1 {
		t.Errorf("the business ran %d times, want 1", d)
	}
}

func (c *checker) keys(t *testing.T) {
	before := c.runs(t)
	type keyCase struct {
		what string
		keys []string
	}
	cases := []keyCase{
		{"a key over 255 bytes", []string{strings.Repeat("k", 256)}},
		{"a key that is not printable ASCII", []string{"ключ-" + randomHex(4)}},
		{"two keys", []string{c.key(), c.key()}},
	}
	if c.op.KeyRequired {
		cases = append(cases, keyCase{"no key", nil})
	}
	for _, k := range c.op.InvalidKeys {
		cases = append(cases, keyCase{"invalid key " + quoteShort(k), []string{k}})
	}
	for _, kc := range cases {
		if a := c.send(c.op.Body, kc.keys...); a.err != nil || a.status != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400", kc.what, a)
		}
	}
	if d := c.runs(t) - before; d != 0 {
		t.Errorf("the business ran %d times for requests with missing or invalid keys, want 0", d)
	}
}

func (c *checker) businessError(t *testing.T) {
	g := c.op.Gate
	if g == nil {
		t.Skip("no Operation.Gate: a business error cannot be injected")
	}
	before := c.runs(t)
	key := c.key()
	g.failNext()
	if a := c.send(c.op.Body, key); a.err != nil || a.status < 500 {
		t.Fatalf("a business error (Gate.Pass returned ErrInjected): %v, want a 5xx (does the business return Pass's error?)", a)
	}
	retry := c.send(c.op.Body, key)
	if retry.err != nil || retry.status < 200 || retry.status > 299 || retry.replayed() {
		t.Errorf("the retry after a business error: %v, want a fresh 2xx (the key is released)", retry)
	}
	want, what := 2, "the failed run and the retry"
	if c.op.Runs != nil {
		want, what = 1, "committed: the retry; the failed run rolled back"
	}
	if d := c.runs(t) - before; d != want {
		t.Errorf("the business ran %d times, want %d (%s)", d, want, what)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return `"` + s + `"`
}
