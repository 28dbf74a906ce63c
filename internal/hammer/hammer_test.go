package hammer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type mode int

const (
	idempotent  mode = iota // first request per key executes (201), concurrent ones 409, later ones replay
	broken                  // executes every request
	badReplay               // like idempotent, but replays a different body
	serverError             // 503 for everything
	rejecting               // first request per key 422 (stored), later ones replay it
	replayAll               // every response is a replay of something never executed here
	refusing                // 400 problem for everything, as for a missing header
	stuck                   // 409 for everything: a claim that never completes
	reused                  // 422 for everything (not stored): keys used with another payload
	limitFirst              // 429 for each key's first request, then like idempotent
)

// refusal is the body mode refusing answers.
const refusal = `{"title":"Bad Request","detail":"the Content-Type header is required"}`

// testServer is a tiny in-memory idempotent endpoint.
type testServer struct {
	mode mode
	// burst, when > 1, holds the first burst requests of each key until all of them have
	// arrived (the hammer must release a key's duplicates together, or they give up with
	// a 500 after 10s), and then holds the executing one until the burst-1 others have been
	// answered 409. So the first burst of every key yields exactly one 201 and burst-1 409s.
	burst int

	mu          sync.Mutex
	executions  int // business executions, over all keys
	keys        map[string]*keyRec
	perKey      map[string]int    // requests by key
	bodies      map[string]string // last request body by key
	traces      map[string]string // last X-Trace by key
	paths       map[string]string // last URL path by key
	inflight    int
	maxInflight int
}

type keyRec struct {
	arrived  int
	arrivals chan struct{} // closed when the first burst has arrived
	claimed  bool
	done     bool
	status   int
	body     string
	rejected int
	rejects  chan struct{} // closed when burst-1 requests were answered 409
}

// wait blocks until c is closed, or reports false after 10s.
func wait(c chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

func newTestServer(t *testing.T, m mode, burst int) (*testServer, *httptest.Server) {
	s := &testServer{mode: m, burst: burst, keys: map[string]*keyRec{}, perKey: map[string]int{},
		bodies: map[string]string{}, traces: map[string]string{}, paths: map[string]string{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *testServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.inflight++
	s.maxInflight = max(s.maxInflight, s.inflight)
	s.perKey[key]++
	s.bodies[key], s.traces[key], s.paths[key] = string(body), r.Header.Get("X-Trace"), r.URL.Path
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()

	switch s.mode {
	case serverError:
		s.mu.Unlock()
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	case broken:
		s.executions++
		n := s.executions
		s.mu.Unlock()
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", n))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"key":%q,"order":%d}`, key, n)
		return
	case replayAll:
		s.mu.Unlock()
		w.Header().Set(ReplayedHeader, "true")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, `{"key":%q}`, key)
		return
	case refusing, stuck, reused:
		s.mu.Unlock()
		status := map[mode]int{refusing: http.StatusBadRequest, stuck: http.StatusConflict, reused: http.StatusUnprocessableEntity}[s.mode]
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		io.WriteString(w, refusal)
		return
	case limitFirst:
		if s.perKey[key] == 1 {
			s.mu.Unlock()
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
	}

	k := s.keys[key]
	if k == nil {
		k = &keyRec{arrivals: make(chan struct{}), rejects: make(chan struct{})}
		s.keys[key] = k
	}
	if k.arrived++; s.burst > 1 && k.arrived <= s.burst {
		if k.arrived == s.burst {
			close(k.arrivals)
		}
		s.mu.Unlock()
		if !wait(k.arrivals) {
			http.Error(w, "duplicates did not arrive together", http.StatusInternalServerError)
			return
		}
		s.mu.Lock()
	}
	if !k.claimed { // claim and execute
		k.claimed = true
		s.mu.Unlock()
		if s.burst > 1 && !wait(k.rejects) {
			http.Error(w, "duplicates were not answered", http.StatusInternalServerError)
			return
		}
		s.mu.Lock()
		status := http.StatusCreated
		if s.mode == rejecting {
			status = http.StatusUnprocessableEntity
		} else {
			s.executions++
		}
		k.done, k.status, k.body = true, status, fmt.Sprintf(`{"key":%q,"order":%d}`, key, s.executions)
		s.mu.Unlock()
		w.WriteHeader(k.status)
		io.WriteString(w, k.body)
		return
	}
	if !k.done {
		k.rejected++
		if k.rejected == s.burst-1 {
			close(k.rejects)
		}
		s.mu.Unlock()
		http.Error(w, "in progress", http.StatusConflict)
		return
	}
	status, replay := k.status, k.body
	s.mu.Unlock()
	if s.mode == badReplay {
		replay += "\n"
	}
	w.Header().Set(ReplayedHeader, "true")
	w.WriteHeader(status)
	io.WriteString(w, replay)
}

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// main runs Main and returns its exit status, stdout and stderr.
func main(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

type counts struct {
	Requests, Executions, DuplicateExecutions, DuplicatedKeys, UnexecutedKeys, ReplayOnlyKeys int
	Replays, ReplayMismatches, UnverifiedReplays                                              int
	ServerErrors, ClientErrors, TransportErrors, Canceled                                     int
	Interrupted, OK                                                                           bool
}

func countsOf(r *Result) counts {
	return counts{r.Requests, r.Executions, r.DuplicateExecutions, r.DuplicatedKeys, r.UnexecutedKeys, r.ReplayOnlyKeys,
		r.Replays, r.ReplayMismatches, r.UnverifiedReplays,
		r.ServerErrors, r.ClientErrors, r.TransportErrors, r.Canceled,
		r.Interrupted, r.OK()}
}

func check(t *testing.T, r *Result, want counts, status map[int]int) {
	t.Helper()
	if got := countsOf(r); got != want {
		t.Errorf("counts\n got %+v\nwant %+v", got, want)
	}
	if !maps.Equal(r.Status, status) {
		t.Errorf("status = %v, want %v", r.Status, status)
	}
	if t.Failed() {
		var b strings.Builder
		r.WriteTable(&b)
		t.Log("\n" + b.String())
	}
}

// n=200 over 10 keys at c=10: each key gets two bursts of 10. The first burst executes
// once and gets nine 409s (the server holds the executor until then); the second replays.
func TestIdempotentServer(t *testing.T) {
	s, srv := newTestServer(t, idempotent, 10)
	r := run(t, Config{URL: srv.URL, Requests: 200, Concurrency: 10, Keys: 10})
	check(t, r, counts{Requests: 200, Executions: 10, Replays: 100, OK: true},
		map[int]int{201: 110, 409: 90})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.executions != 10 || s.maxInflight != 10 {
		t.Errorf("server: executions %d, max in flight %d; want 10, 10", s.executions, s.maxInflight)
	}
	for _, k := range r.PerKey {
		if k.Requests != 20 || k.Executions != 1 || k.Replays != 10 || s.perKey[k.Key] != 20 {
			t.Errorf("key %+v, server saw %d requests", k, s.perKey[k.Key])
		}
	}
	if r.P50 <= 0 || r.P50 > r.P90 || r.P90 > r.P99 || r.P99 > r.Max || r.RequestsPerSecond <= 0 {
		t.Errorf("latency p50 %v p90 %v p99 %v max %v, rate %v", r.P50, r.P90, r.P99, r.Max, r.RequestsPerSecond)
	}
}

func TestMainIdempotent(t *testing.T) {
	_, srv := newTestServer(t, idempotent, 10)
	code, out, errs := main(t, "-url", srv.URL, "-n", "200", "-c", "10", "-keys", "10", "-q")
	if code != ExitOK {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"requests     200 in ", "status       201: 110   409: 90\n", "executions   10 (exactly one per key)\n",
		"replays      100, all match", "transport    0 errors\n", "result       OK\n", "latency      p50 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if errs != "" {
		t.Errorf("stderr with -q: %q", errs)
	}
}

func TestBrokenServer(t *testing.T) {
	_, srv := newTestServer(t, broken, 0)
	r := run(t, Config{URL: srv.URL, Requests: 200, Concurrency: 10, Keys: 10})
	check(t, r, counts{Requests: 200, Executions: 200, DuplicateExecutions: 190, DuplicatedKeys: 10},
		map[int]int{201: 200})

	code, out, _ := main(t, "-url", srv.URL, "-n", "200", "-c", "10", "-keys", "10", "-q")
	if code != ExitFail {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"!!! DUPLICATE EXECUTION: 10 of 10 keys executed more than once (190 extra executions)",
		"executed 20 times", "result       FAIL: DUPLICATE EXECUTION",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

func TestReplayMismatch(t *testing.T) {
	_, srv := newTestServer(t, badReplay, 10)
	r := run(t, Config{URL: srv.URL, Requests: 200, Concurrency: 10, Keys: 10, KeyPrefix: "k"})
	check(t, r, counts{Requests: 200, Executions: 10, Replays: 100, ReplayMismatches: 100},
		map[int]int{201: 110, 409: 90})
	if len(r.MismatchSamples) != MaxSamples {
		t.Fatalf("%d samples", len(r.MismatchSamples))
	}
	m := r.MismatchSamples[0]
	if m.Key != "k0" || m.Count != 10 || m.Unverified ||
		m.Original != `201, 22 bytes: "{\"key\":\"k0\",\"order\":1}"` || m.Replay != `201, 23 bytes: "{\"key\":\"k0\",\"order\":1}\n"` {
		t.Errorf("sample %+v", m)
	}

	s2, srv2 := newTestServer(t, badReplay, 10)
	code, out, _ := main(t, "-url", srv2.URL, "-n", "200", "-keys", "10", "-q")
	if code != ExitFail || !strings.Contains(out, "!!! REPLAY MISMATCH: 100 of 100 replays differ") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	s2.mu.Lock()
	defer s2.mu.Unlock()
	if s2.executions != 10 {
		t.Errorf("server executions %d", s2.executions)
	}
}

func TestServerError(t *testing.T) {
	_, srv := newTestServer(t, serverError, 0)
	r := run(t, Config{URL: srv.URL, Requests: 50, Keys: 5})
	check(t, r, counts{Requests: 50, ServerErrors: 50, UnexecutedKeys: 5}, map[int]int{503: 50})
	code, out, _ := main(t, "-url", srv.URL, "-n", "50", "-keys", "5", "-q")
	if code != ExitFail || !strings.Contains(out, "FAIL: 50 5xx responses") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestTransportErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	r := run(t, Config{URL: srv.URL, Requests: 20, Concurrency: 5, Keys: 2})
	check(t, r, counts{Requests: 20, TransportErrors: 20, UnexecutedKeys: 2}, map[int]int{})
	if len(r.ErrorSamples) == 0 || r.ErrorSamples[0].Count == 0 {
		t.Errorf("error samples %+v", r.ErrorSamples)
	}
	code, out, _ := main(t, "-url", srv.URL, "-n", "20", "-keys", "2", "-q")
	if code != ExitFail || !strings.Contains(out, "transport    20 ERRORS") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// A stored 4xx is the original its replays are compared with; it is no execution, but
// the key was answered: no failure.
func TestStored4xx(t *testing.T) {
	_, srv := newTestServer(t, rejecting, 0)
	r := run(t, Config{URL: srv.URL, Requests: 12, Concurrency: 1, Keys: 3})
	check(t, r, counts{Requests: 12, Replays: 9, ReplayOnlyKeys: 3, OK: true}, map[int]int{422: 12})
}

// Keys answered only by replays were executed before this run: no failure.
func TestUnverifiedReplays(t *testing.T) {
	_, srv := newTestServer(t, replayAll, 0)
	r := run(t, Config{URL: srv.URL, Requests: 12, Concurrency: 4, Keys: 3})
	check(t, r, counts{Requests: 12, Replays: 12, UnverifiedReplays: 12, ReplayOnlyKeys: 3, OK: true},
		map[int]int{200: 12})
	code, out, _ := main(t, "-url", srv.URL, "-n", "12", "-keys", "3", "-key-prefix", "r", "-q")
	if want := "executions   0 (at most one per key; 3 keys answered only by replays (executed before this run))\n"; code != ExitOK || !strings.Contains(out, want) {
		t.Errorf("exit %d, want 0 and %q:\n%s", code, want, out)
	}
}

// A run in which nothing ran fails, and shows the first refused response: every answer a
// 400 (a missing header), every answer a 409 (a claim that never completes), or every
// answer a 422 (keys used before with another payload).
func TestNothingRan(t *testing.T) {
	body := fmt.Sprintf("%d bytes, detail: %q", len(refusal), "the Content-Type header is required")
	for _, c := range []struct {
		mode mode
		want []string
	}{
		{refusing, []string{
			"status       400: 40\n",
			"!!! REFUSED: 40 4xx responses other than 409 and 422 (requests the endpoint refused: nothing ran for them)\n",
			"!!!   first, key k0: 400, " + body + "\n",
			"executions   0 (at most one per key; 10 keys NEVER EXECUTED)\n",
			"!!! NEVER EXECUTED: 10 of 10 keys got neither an execution nor a replay\n",
			"result       FAIL: 40 4xx responses other than 409 and 422; 10 keys never executed\n",
		}},
		{stuck, []string{
			"!!! NEVER EXECUTED: 10 of 10 keys got neither an execution nor a replay\n",
			"!!!   first answer, key k0: 409, " + body + "\n",
			"result       FAIL: 10 keys never executed\n",
		}},
		{reused, []string{
			"!!!   first answer, key k0: 422, " + body + "\n",
			"result       FAIL: 10 keys never executed\n",
		}},
	} {
		_, srv := newTestServer(t, c.mode, 0)
		code, out, errs := main(t, "-url", srv.URL, "-n", "40", "-keys", "10", "-key-prefix", "k", "-q")
		if code != ExitFail {
			t.Errorf("mode %d: exit %d, want 1:\n%s%s", c.mode, code, out, errs)
		}
		for _, want := range c.want {
			if !strings.Contains(out, want) {
				t.Errorf("mode %d: stdout lacks %q:\n%s", c.mode, want, out)
			}
		}
		if c.mode == refusing && strings.Contains(out, "first answer") {
			t.Errorf("the refused response shown twice:\n%s", out)
		}
	}

	_, srv := newTestServer(t, refusing, 0)
	code, out, _ := main(t, "-url", srv.URL, "-n", "4", "-keys", "2", "-key-prefix", "j", "-json", "-q")
	var got struct {
		OK               bool     `json:"ok"`
		Problems         []string `json:"problems"`
		ClientErrors     int      `json:"client_errors"`
		UnexecutedKeys   int      `json:"unexecuted_keys"`
		FirstClientError *Answer  `json:"first_client_error"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := Answer{Key: "j0", Response: "400, " + body}
	if code != ExitFail || got.OK || len(got.Problems) != 2 || got.ClientErrors != 4 || got.UnexecutedKeys != 2 ||
		got.FirstClientError == nil || *got.FirstClientError != want {
		t.Errorf("-json: exit %d, %+v\n%s", code, got, out)
	}
}

// A 4xx other than 409 and 422 fails the run even when every key executed.
func TestClientErrorFails(t *testing.T) {
	_, srv := newTestServer(t, limitFirst, 0)
	r := run(t, Config{URL: srv.URL, Requests: 6, Concurrency: 1, Keys: 2, KeyPrefix: "l"})
	check(t, r, counts{Requests: 6, Executions: 2, Replays: 2, ClientErrors: 2}, map[int]int{429: 2, 201: 4})
	if want := (Answer{Key: "l0", Response: `429, 10 bytes: "slow down\n"`}); r.FirstClientError == nil || *r.FirstClientError != want {
		t.Errorf("first client error %+v, want %+v", r.FirstClientError, want)
	}
	_, srv = newTestServer(t, limitFirst, 0)
	code, out, _ := main(t, "-url", srv.URL, "-n", "6", "-c", "1", "-keys", "2", "-q")
	if code != ExitFail || !strings.Contains(out, "result       FAIL: 2 4xx responses other than 409 and 422\n") {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
}

// With -retries each request is retried with its key (idemclient): the 429s become the
// executions they would have been, and Attempts counts the retries.
func TestRetries(t *testing.T) {
	s, srv := newTestServer(t, limitFirst, 0)
	r := run(t, Config{URL: srv.URL, Requests: 6, Concurrency: 1, Keys: 2, KeyPrefix: "r", Retries: 1})
	check(t, r, counts{Requests: 6, Executions: 2, Replays: 4, OK: true}, map[int]int{201: 6})
	if r.Attempts != 8 || r.Retries != 1 {
		t.Errorf("attempts %d, retries %d; want 8, 1", r.Attempts, r.Retries)
	}
	if s.perKey["r0"] != 4 || s.perKey["r1"] != 4 {
		t.Errorf("the server saw %v, want 4 requests per key (one retried)", s.perKey)
	}
	_, srv = newTestServer(t, limitFirst, 0)
	code, out, _ := main(t, "-url", srv.URL, "-n", "6", "-c", "1", "-keys", "2", "-q", "-retries", "2")
	if code != ExitOK || !strings.Contains(out, "attempts     8 (up to 2 retries per request") {
		t.Errorf("exit %d, want 0 and the attempts line:\n%s", code, out)
	}
	if code, _, stderr := main(t, "-url", srv.URL, "-retries", "-1"); code != ExitUsage || !strings.Contains(stderr, "retries") {
		t.Errorf("-retries -1: exit %d, %s", code, stderr)
	}
}

// 23 requests over 5 keys: 5,5,5,4,4. At c=4 the 5-request keys go as bursts of 4 and 1.
func TestUnevenKeysAndBound(t *testing.T) {
	s, srv := newTestServer(t, idempotent, 4)
	r := run(t, Config{URL: srv.URL, Requests: 23, Concurrency: 4, Keys: 5, KeyPrefix: "u"})
	check(t, r, counts{Requests: 23, Executions: 5, Replays: 3, OK: true}, map[int]int{201: 8, 409: 15})
	want := map[string]int{"u0": 5, "u1": 5, "u2": 5, "u3": 4, "u4": 4}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !maps.Equal(s.perKey, want) || s.maxInflight != 4 {
		t.Errorf("server saw %v, max in flight %d", s.perKey, s.maxInflight)
	}
}

func TestTemplating(t *testing.T) {
	s, srv := newTestServer(t, idempotent, 0)
	code, out, errs := main(t, "-url", srv.URL+"/orders/{{i}}", "-n", "3", "-keys", "3", "-q",
		"-key-prefix", "tpl-", "-H", "X-Trace: t-{{i}}-{{key}}", "-H", "Content-Type: application/json",
		"-d", `{"ref":"{{key}}","qty":{{i}}}`)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range 3 {
		key := fmt.Sprintf("tpl-%d", i)
		if got, want := s.bodies[key], fmt.Sprintf(`{"ref":%q,"qty":%d}`, key, i); got != want {
			t.Errorf("body %q, want %q", got, want)
		}
		if got, want := s.traces[key], fmt.Sprintf("t-%d-%s", i, key); got != want {
			t.Errorf("X-Trace %q, want %q", got, want)
		}
		if got, want := s.paths[key], fmt.Sprintf("/orders/%d", i); got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}

	file := filepath.Join(t.TempDir(), "body.json")
	os.WriteFile(file, []byte(`{"from":"file","key":"{{key}}"}`), 0o600)
	s2, srv2 := newTestServer(t, idempotent, 0)
	if code, out, errs := main(t, "-url", srv2.URL, "-n", "1", "-key-prefix", "f", "-d", "@"+file, "-q"); code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	s2.mu.Lock()
	defer s2.mu.Unlock()
	if got := s2.bodies["f0"]; got != `{"from":"file","key":"f0"}` {
		t.Errorf("body from file %q", got)
	}
}

func TestRandomPrefix(t *testing.T) {
	s, srv := newTestServer(t, idempotent, 0)
	r1 := run(t, Config{URL: srv.URL, Requests: 2, Keys: 2})
	r2 := run(t, Config{URL: srv.URL, Requests: 2, Keys: 2})
	s.mu.Lock()
	defer s.mu.Unlock()
	if r1.KeyPrefix == r2.KeyPrefix || !strings.HasPrefix(r1.KeyPrefix, "hammer-") || len(s.perKey) != 4 {
		t.Errorf("prefixes %q %q, server keys %v", r1.KeyPrefix, r2.KeyPrefix, slices.Sorted(maps.Keys(s.perKey)))
	}
	if r2.Executions != 2 || !r2.OK() {
		t.Errorf("second run executions %d ok %v", r2.Executions, r2.OK())
	}
}

func TestJSON(t *testing.T) {
	_, srv := newTestServer(t, broken, 0)
	code, out, _ := main(t, "-url", srv.URL, "-n", "6", "-keys", "2", "-key-prefix", "j", "-json", "-q")
	if code != ExitFail {
		t.Errorf("exit %d", code)
	}
	var got struct {
		OK                  bool               `json:"ok"`
		Problems            []string           `json:"problems"`
		Requests            int                `json:"requests"`
		Status              map[string]int     `json:"status"`
		Executions          int                `json:"executions"`
		DuplicateExecutions int                `json:"duplicate_executions"`
		DuplicateKeys       []jsonKey          `json:"duplicate_keys"`
		LatencyMS           map[string]float64 `json:"latency_ms"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.OK || len(got.Problems) != 1 || got.Requests != 6 || got.Status["201"] != 6 || got.Executions != 6 ||
		got.DuplicateExecutions != 4 || !slices.Equal(got.DuplicateKeys, []jsonKey{{"j0", 3}, {"j1", 3}}) ||
		got.LatencyMS["max"] <= 0 {
		t.Errorf("%+v\n%s", got, out)
	}
}

func TestUsage(t *testing.T) {
	_, srv := newTestServer(t, idempotent, 0)
	for _, args := range [][]string{
		{},
		{"-bogus"},
		{"-url", srv.URL, "extra"},
		{"-url", "ftp://example.com/"},
		{"-url", "://bad"},
		{"-url", srv.URL, "-n", "10", "-keys", "11"},
		{"-url", srv.URL, "-c", "0"},
		{"-url", srv.URL, "-n", "-1"},
		{"-url", srv.URL, "-n", "x"},
		{"-url", srv.URL, "-timeout", "0s"},
		{"-url", srv.URL, "-H", "no colon"},
		{"-url", srv.URL, "-H", "bad name: v"},
		{"-url", srv.URL, "-X", "GE T"},
		{"-url", srv.URL, "-key-header", ""},
		{"-url", srv.URL, "-key-prefix", ""},
		{"-url", srv.URL, "-key-prefix", "a b"},
		{"-url", srv.URL, "-d", "@" + filepath.Join(t.TempDir(), "missing")},
	} {
		code, out, errs := main(t, args...)
		if code != ExitUsage || out != "" || errs == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-url", srv.URL, "-help"}} {
		code, out, errs := main(t, args...)
		if code != ExitOK || errs != "" || !strings.HasPrefix(out, "usage: idemgen hammer -url URL") ||
			!strings.Contains(out, "-key-header") || !strings.Contains(out, "-key-format FORMAT") {
			t.Errorf("%q: exit %d, stderr %q, stdout %q", args, code, errs, out)
		}
	}
	if len(srvRequests(srv)) != 0 {
		t.Error("usage errors sent requests")
	}
	if _, err := Run(context.Background(), Config{URL: srv.URL, Keys: -1}); err == nil {
		t.Error("Run accepted negative keys")
	}
}

// A bad flag or value is one line on stderr: what is wrong, the closest flag when one is
// close, and where help is.
func TestFlagErrors(t *testing.T) {
	const help = "; run 'idemgen hammer -help' for usage\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-urll", "http://x"}, "idemgen hammer: unknown flag -urll (did you mean -url?)"},
		{[]string{"-url", "http://x", "-n", "abc"}, `idemgen hammer: -n: "abc" is not a whole number`},
		{[]string{"-url", "http://x", "-H", "bad header"}, `idemgen hammer: -H: want 'Name: value', got "bad header"`},
		{[]string{"-url", "http://x", "-timeout", "5"}, `idemgen hammer: -timeout: "5" is not a duration (want one such as 10m or 30s)`},
		{[]string{"-url", "http://x", "-x", "PUT"}, "idemgen hammer: unknown flag -x (did you mean -X?)"},
		{[]string{"-url", "http://x", "--key-prefx", "p"}, "idemgen hammer: unknown flag --key-prefx (did you mean -key-prefix?)"},
		{[]string{"-url", "http://x", "-X", "GE T"}, `idemgen hammer: -X "GE T" is not an HTTP method (a token: letters, digits and !#$%&'*+-.^_` + "`|~)"},
		{[]string{"-url", "http://x", "-key-format", "uuid4"}, `idemgen hammer: -key-format must be prefix or uuid, not "uuid4"`},
		{[]string{"-url", "http://x", "extra"}, `idemgen hammer: unexpected argument "extra"`},
		{[]string{"-url", "http://x", "-n", "2", "-keys", "5"}, "idemgen hammer: -keys 5 must not exceed -n 2"},
		{[]string{"-url", "http://x", "-keys", "101"}, "idemgen hammer: -keys 101 must not exceed -n 100"},
		{[]string{}, "idemgen hammer: -url is required"},
	} {
		code, out, errs := main(t, c.args...)
		if code != ExitUsage || out != "" || errs != c.want+help {
			t.Errorf("%q: exit %d, stdout %q, stderr\n%q\nwant exit 2 and\n%q", c.args, code, out, errs, c.want+help)
		}
	}
}

// -key-format uuid sends version 4 UUIDs, one per key index, the same for the same
// -key-prefix; {{key}} is the UUID.
func TestKeyFormatUUID(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	s, srv := newTestServer(t, idempotent, 0)
	args := []string{"-url", srv.URL, "-n", "6", "-c", "1", "-keys", "3", "-key-format", "uuid", "-key-prefix", "seed-", "-d", `{"ref":"{{key}}"}`, "-q"}
	code, out, errs := main(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	s.mu.Lock()
	keys := slices.Sorted(maps.Keys(s.perKey))
	for _, k := range keys {
		if !v4.MatchString(k) || s.perKey[k] != 2 || s.bodies[k] != `{"ref":"`+k+`"}` {
			t.Errorf("key %q: %d requests, body %q", k, s.perKey[k], s.bodies[k])
		}
	}
	s.mu.Unlock()
	if len(keys) != 3 {
		t.Fatalf("server saw keys %q, want 3", keys)
	}
	key0 := uuidKey("seed-", 0)
	if want := "3 uuid keys (seed seed-; key 0 is " + key0 + "), 2 requests each;"; !strings.Contains(out, want) || !slices.Contains(keys, key0) {
		t.Errorf("stdout lacks %q, or the server did not see %s:\n%s", want, key0, out)
	}
	// The same seed gives the same keys: all replays now.
	code, out, _ = main(t, args...)
	if code != ExitOK || !strings.Contains(out, "executions   0 (at most one per key; 3 keys answered only by replays") {
		t.Errorf("second run: exit %d:\n%s", code, out)
	}
	s.mu.Lock()
	if len(s.perKey) != 3 || s.executions != 3 {
		t.Errorf("after the second run the server saw keys %v, %d executions", s.perKey, s.executions)
	}
	s.mu.Unlock()
	// Another seed (the default: random per run), other keys.
	r := run(t, Config{URL: srv.URL, Requests: 1, KeyFormat: KeyFormatUUID})
	if k := r.PerKey[0].Key; !v4.MatchString(k) || slices.Contains(keys, k) {
		t.Errorf("random seed gave key %q", k)
	}
}

// The summary speaks as a user does: "1 request each"; the method of a transport error
// as it was sent.
func TestWording(t *testing.T) {
	_, srv := newTestServer(t, idempotent, 0)
	if _, out, _ := main(t, "-url", srv.URL, "-n", "3", "-keys", "3", "-key-prefix", "w", "-q"); !strings.Contains(out, "3 keys (w*), 1 request each; concurrency 10\n") {
		t.Errorf("stdout:\n%s", out)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	_, out, _ := main(t, "-url", closed.URL, "-X", "FOO", "-n", "1", "-q")
	for _, want := range []string{
		fmt.Sprintf("1x FOO %q: ", closed.URL),
		"transport    1 ERROR (0 timeouts)\n",
		"result       FAIL: 1 transport error; 1 key never executed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

func srvRequests(srv *httptest.Server) map[string]int {
	s := srv.Config.Handler.(*testServer)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perKey
}

// blockingServer answers nothing until the client goes away; arrived gets one value
// per request.
func blockingServer(t *testing.T) (*httptest.Server, chan struct{}) {
	arrived := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv, arrived
}

// cancelOnArrival returns a context cancelled once the first request arrives.
func cancelOnArrival(arrived <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	return ctx
}

// Cancelling the context aborts the requests in flight and reports a partial result.
func TestCancel(t *testing.T) {
	srv, arrived := blockingServer(t)
	var stdout, stderr bytes.Buffer
	code := Main(cancelOnArrival(arrived), []string{"-url", srv.URL, "-n", "100", "-c", "5", "-keys", "10", "-q"}, &stdout, &stderr)
	if code != ExitFail || !strings.Contains(stdout.String(), "!!! INTERRUPTED: 0 of 100 requests completed, 5 cancelled") {
		t.Errorf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}

	srv, arrived = blockingServer(t)
	r, err := Run(cancelOnArrival(arrived), Config{URL: srv.URL, Requests: 100, Concurrency: 5, Keys: 10})
	if err != nil {
		t.Fatal(err)
	}
	check(t, r, counts{Canceled: 5, Interrupted: true}, map[int]int{})
}

// lineWriter records writes and closes wrote at the first.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	wrote chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.wrote) })
	return w.buf.Write(p)
}

func TestProgress(t *testing.T) {
	pw := &lineWriter{wrote: make(chan struct{})}
	// The server answers only once a progress line has been written.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-pw.wrote:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	r := run(t, Config{URL: srv.URL, Requests: 10, Keys: 10, Progress: pw, ProgressInterval: time.Millisecond})
	check(t, r, counts{Requests: 10, Executions: 10, OK: true}, map[int]int{201: 10})
	pw.mu.Lock()
	out := pw.buf.String()
	pw.mu.Unlock()
	if !strings.HasPrefix(out, "hammer: 0/10 requests (0%), 0 req/s\n") {
		t.Errorf("progress %q", out)
	}

	// A run shorter than the interval prints nothing.
	quiet := &lineWriter{wrote: make(chan struct{})}
	_, srv2 := newTestServer(t, idempotent, 0)
	run(t, Config{URL: srv2.URL, Requests: 10, Progress: quiet, ProgressInterval: time.Hour})
	if quiet.buf.Len() != 0 {
		t.Errorf("progress %q", quiet.buf.String())
	}
}

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 200)
	for i := range d {
		d[i] = time.Duration(i + 1)
	}
	if p := []time.Duration{percentile(d, 50), percentile(d, 90), percentile(d, 99)}; !slices.Equal(p, []time.Duration{100, 180, 198}) {
		t.Errorf("percentiles %v", p)
	}
	if p := percentile(d[:1], 99); p != 1 {
		t.Errorf("percentile of one %v", p)
	}
}

// The first refused response shows what the endpoint said: a problem detail's (or any
// JSON object's) "detail" whole, up to 500 bytes; another body up to 300 bytes.
func TestRefusalBody(t *testing.T) {
	// Like the example server's answer to a request without Content-Type: some 140 bytes,
	// the useful part after byte 120.
	const missingCT = `{"type":"about:blank","title":"Bad Request","status":400,` +
		`"detail":"request does not match the spec: header Content-Type has unexpected value"}`
	longDetail := strings.Repeat("d", 600)
	longText := strings.Repeat("é", 200) // 400 bytes; cut on a rune boundary
	for _, c := range []struct {
		name, ct, body, want string
	}{
		{"problem", "application/problem+json", missingCT,
			fmt.Sprintf(`400, %d bytes, detail: "request does not match the spec: header Content-Type has unexpected value"`, len(missingCT))},
		{"json with detail", "application/json", `{"detail":"no \"qty\"","errors":[1,2]}`,
			`400, 38 bytes, detail: "no \"qty\""`},
		{"long detail", "application/problem+json", `{"detail":"` + longDetail + `"}`,
			`400, 613 bytes, detail: "` + longDetail[:500] + `…"`},
		{"detail not a string", "application/json", `{"detail":7}`, `400, 12 bytes: "{\"detail\":7}"`},
		{"text", "text/plain", longText, `400, 400 bytes: "` + strings.Repeat("é", 150) + `…"`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", c.ct)
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, c.body)
		}))
		r := run(t, Config{URL: srv.URL, Requests: 1, KeyPrefix: "b"})
		srv.Close()
		want := Answer{Key: "b0", Response: c.want}
		if r.FirstClientError == nil || *r.FirstClientError != want {
			t.Errorf("%s: first client error\n got %+v\nwant %+v", c.name, r.FirstClientError, want)
		}
		if r.FirstRefusal == nil || *r.FirstRefusal != want {
			t.Errorf("%s: first refusal\n got %+v\nwant %+v", c.name, r.FirstRefusal, want)
		}
	}
}

// A key whose only answers were 409 (in progress) when the run was interrupted may have
// been running: the run fails for the interruption, not for a key never executed.
func TestCancelInProgress(t *testing.T) {
	// Each key's first burst of 2 is answered 409; the next burst blocks until the client
	// goes away, and its first request cancels the run.
	newServer := func() (*httptest.Server, chan struct{}) {
		var mu sync.Mutex
		seen := map[string]int{}
		arrived := make(chan struct{}, 100)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[r.Header.Get("Idempotency-Key")]++
			n := seen[r.Header.Get("Idempotency-Key")]
			mu.Unlock()
			if n <= 2 {
				http.Error(w, "being processed", http.StatusConflict)
				return
			}
			arrived <- struct{}{}
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		return srv, arrived
	}
	srv, arrived := newServer()
	r, err := Run(cancelOnArrival(arrived), Config{URL: srv.URL, Requests: 4, Concurrency: 2, Keys: 1, KeyPrefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	check(t, r, counts{Requests: 2, Canceled: 2, Interrupted: true}, map[int]int{409: 2})
	if r.UnknownKeys != 1 || r.FirstRefusal != nil {
		t.Errorf("unknown keys %d, first refusal %+v; want 1 and none", r.UnknownKeys, r.FirstRefusal)
	}

	srv, arrived = newServer()
	var stdout, stderr bytes.Buffer
	code := Main(cancelOnArrival(arrived), []string{"-url", srv.URL, "-n", "4", "-c", "2", "-key-prefix", "p", "-q"}, &stdout, &stderr)
	out := stdout.String()
	for _, want := range []string{
		"executions   0 (at most one per key; 1 key unknown (interrupted before an execution or a replay))\n",
		"result       FAIL: interrupted after 2 of 4 requests\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if code != ExitFail || strings.Contains(out, "NEVER") {
		t.Errorf("exit %d:\n%s%s", code, out, stderr.String())
	}

	srv, arrived = newServer()
	stdout.Reset()
	Main(cancelOnArrival(arrived), []string{"-url", srv.URL, "-n", "4", "-c", "2", "-json", "-q"}, &stdout, &stderr)
	var got struct {
		UnexecutedKeys int `json:"unexecuted_keys"`
		UnknownKeys    int `json:"unknown_keys"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got.UnexecutedKeys != 0 || got.UnknownKeys != 1 {
		t.Errorf("-json: %+v, %v\n%s", got, err, stdout.String())
	}
}

// A second run with the same keys gets replays only: the summary says they have no
// original in this run and what they were compared with, without claiming they match one.
func TestRerunWording(t *testing.T) {
	_, srv := newTestServer(t, idempotent, 0)
	args := []string{"-url", srv.URL, "-n", "12", "-c", "1", "-keys", "3", "-key-prefix", "s", "-q"}
	if code, out, _ := main(t, args...); code != ExitOK || !strings.Contains(out, "replays      9, all match their key's original response byte for byte\n") {
		t.Fatalf("first run: exit %d:\n%s", code, out)
	}
	code, out, _ := main(t, args...)
	want := "replays      12, of keys with no original response in this run; the 9 after each key's first match it byte for byte\n"
	if code != ExitOK || !strings.Contains(out, want) || strings.Contains(out, "original response byte for byte") ||
		strings.Count(out, "\n") != 8 {
		t.Errorf("second run: exit %d, want 0 and %q:\n%s", code, want, out)
	}
	r := run(t, Config{URL: srv.URL, Requests: 12, Concurrency: 1, Keys: 3, KeyPrefix: "s"})
	check(t, r, counts{Requests: 12, Replays: 12, UnverifiedReplays: 12, ReplayOnlyKeys: 3, OK: true}, map[int]int{201: 12})
	if r.UnverifiedKeys != 3 {
		t.Errorf("unverified keys %d, want 3", r.UnverifiedKeys)
	}

	// Keys with an original and keys without one in the same run.
	args = []string{"-url", srv.URL, "-n", "24", "-c", "1", "-keys", "6", "-key-prefix", "s", "-q"}
	code, out, _ = main(t, args...)
	want = "replays      21: 9 match their key's original response byte for byte; 12 are of keys with no original response in this run, and the 9 after each key's first match it byte for byte\n"
	if code != ExitOK || !strings.Contains(out, want) {
		t.Errorf("mixed run: exit %d, want 0 and %q:\n%s", code, want, out)
	}

	// One replay per key: nothing to compare.
	_, srv = newTestServer(t, replayAll, 0)
	code, out, _ = main(t, "-url", srv.URL, "-n", "3", "-keys", "3", "-q")
	want = "replays      3, of keys with no original response in this run; one per key, nothing to compare\n"
	if code != ExitOK || !strings.Contains(out, want) {
		t.Errorf("one replay per key: exit %d, want 0 and %q:\n%s", code, want, out)
	}
}

// Replays of a key with no original in this run that differ from its first replay are
// mismatches, and the summary says what they were compared with.
func TestUnverifiedMismatch(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		body := fmt.Sprintf(`{"replay":%d}`, n)
		mu.Unlock()
		w.Header().Set(ReplayedHeader, "true")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	code, out, _ := main(t, "-url", srv.URL, "-n", "4", "-c", "1", "-key-prefix", "m", "-q")
	for _, want := range []string{
		"replays      4, 3 MISMATCHED\n",
		"!!! REPLAY MISMATCH: 3 of 4 replays differ from their key's original response (or, lacking one in this run, its first replay)\n",
		"!!!     first replay 200, 12 bytes: \"{\\\"replay\\\":1}\"\n",
		"             4 replays of keys with no original response in this run (compared with their key's first replay)\n",
		"result       FAIL: 3 mismatched replays\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if code != ExitFail {
		t.Errorf("exit %d, want 1", code)
	}
}
