package idemredis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// A completed key is replayed byte for byte, with its stored headers (never Set-Cookie)
// and Idempotent-Replayed: true; the record's TTL is the retention, by the server's clock.
func TestCompleteThenReplay(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	var runs atomic.Int32
	fn := func(ctx context.Context) (*idem.Response, error) {
		k, ok := idem.KeyFromContext(ctx)
		if !ok || k.Key != "k-1" {
			t.Errorf("KeyFromContext = %+v, %v; want key k-1", k, ok)
		}
		return created(int(runs.Add(1))), nil
	}
	first, err := e.store.Do(ctx, testPolicy, ptr("k-1"), body("p1"), fn)
	if err != nil || first.Outcome != idem.OutcomeCompleted {
		t.Fatalf("first: %+v, %v; want completed", first, err)
	}
	ttl, err := e.rdb.PTTL(ctx, redisKey(DefaultPrefix, "", "k-1")).Result()
	if err != nil || ttl <= testPolicy.Lease || ttl > testPolicy.Retention {
		t.Errorf("completed record's TTL %v (%v), want the retention (%v)", ttl, err, testPolicy.Retention)
	}
	// The body's key order and whitespace do not change the fingerprint.
	again, err := e.store.Do(ctx, testPolicy, ptr("k-1"), []idem.Part{{Name: "body", Value: json.RawMessage(` { "payment" : "p1" } `)}}, fn)
	if err != nil || again.Outcome != idem.OutcomeReplayed {
		t.Fatalf("replay: %+v, %v; want replayed", again, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("business ran %d times, want 1", n)
	}
	orig, rep := written(t, first), written(t, again)
	if orig.StatusCode != rep.StatusCode || readAll(t, orig.Body) != readAll(t, rep.Body) {
		t.Errorf("replay differs: %d vs %d", rep.StatusCode, orig.StatusCode)
	}
	if rep.Header.Get("Idempotent-Replayed") != "true" || rep.Header.Get("Location") != "/stars/1" {
		t.Errorf("replay headers %v", rep.Header)
	}
	if rep.Header.Get("Set-Cookie") != "" || orig.Header.Get("Set-Cookie") == "" {
		t.Errorf("Set-Cookie: original %q, replay %q; want it sent to the first client only", orig.Header.Get("Set-Cookie"), rep.Header.Get("Set-Cookie"))
	}
	if got := e.seen.String(); e.seen.get(idem.OutcomeClaimed) != 1 || e.seen.get(idem.OutcomeCompleted) != 1 || e.seen.get(idem.OutcomeReplayed) != 1 {
		t.Errorf("outcomes %s", got)
	}
}

// A claim's TTL is the lease: a key whose owner vanished frees itself.
func TestClaimTTLIsTheLease(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(ctx context.Context) (*idem.Response, error) {
		ttl, err := e.rdb.PTTL(ctx, redisKey(DefaultPrefix, "", "k")).Result()
		if err != nil || ttl <= 0 || ttl > testPolicy.Lease {
			t.Errorf("claim's TTL %v (%v), want at most the lease %v", ttl, err, testPolicy.Lease)
		}
		return created(1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMismatchIs422(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	ok := func(context.Context) (*idem.Response, error) { return created(1), nil }
	if _, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p1"), ok); err != nil {
		t.Fatal(err)
	}
	other := *testPolicy
	other.Operation = "followUser"
	for name, tc := range map[string]struct {
		p     *idem.Policy
		parts []idem.Part
		want  string
	}{
		"payload":   {testPolicy, body("p2"), "different request payload"},
		"operation": {&other, body("p1"), "another operation (starPayment)"},
	} {
		resp, err := e.store.Do(ctx, tc.p, ptr("k"), tc.parts, func(context.Context) (*idem.Response, error) {
			t.Errorf("%s: business ran", name)
			return created(2), nil
		})
		if err != nil || resp.Status != http.StatusUnprocessableEntity || resp.Outcome != idem.OutcomeMismatch ||
			!strings.Contains(string(resp.Body), tc.want) {
			t.Errorf("%s: %d %s %s, %v; want 422 mentioning %q", name, resp.Status, resp.Outcome, resp.Body, err, tc.want)
		}
	}
}

func TestKeyRules(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	never := func(context.Context) (*idem.Response, error) {
		t.Error("business ran")
		return created(1), nil
	}
	resp, _ := e.store.Do(ctx, testPolicy, nil, nil, never)
	if resp.Status != 400 || resp.Outcome != idem.OutcomeMissingKey {
		t.Errorf("no key: %d %s", resp.Status, resp.Outcome)
	}
	resp, _ = e.store.Do(ctx, testPolicy, ptr("bad\x01key"), nil, never)
	if resp.Status != 400 || resp.Outcome != idem.OutcomeInvalidKey {
		t.Errorf("bad key: %d %s", resp.Status, resp.Outcome)
	}
	if ct := resp.Header[0]; ct.Value != "application/problem+json" {
		t.Errorf("rejection Content-Type %q", ct.Value)
	}
	optional := *testPolicy
	optional.KeyRequired = false
	var runs int
	resp, err := e.store.Do(ctx, &optional, nil, nil, func(context.Context) (*idem.Response, error) { runs++; return created(runs), nil })
	if err != nil || resp.Outcome != idem.OutcomeUnkeyed || runs != 1 {
		t.Errorf("unkeyed: %+v %v, %d runs", resp, err, runs)
	}
}

// A business error, or a response that is not cacheable, releases the claim: the retry
// runs at once. Nothing of a failed business is ever replayed.
func TestFailureReleases(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	boom := errors.New("boom")
	_, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	resp, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) {
		return &idem.Response{Status: 503, Body: []byte("later")}, nil
	})
	if err != nil || resp.Outcome != idem.OutcomeNotStored {
		t.Fatalf("5xx: %+v %v", resp, err)
	}
	resp, err = e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) { return created(3), nil })
	if err != nil || resp.Outcome != idem.OutcomeCompleted {
		t.Fatalf("third: %+v %v; want completed (the claims were released)", resp, err)
	}
	if n := e.seen.get(idem.OutcomeReleased); n != 2 {
		t.Errorf("%d releases, want 2 (%s)", n, e.seen)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on")
			}
		}()
		_, _ = e.store.Do(ctx, testPolicy, ptr("k2"), body("p"), func(context.Context) (*idem.Response, error) { panic("business panic") })
	}()
	resp, err = e.store.Do(ctx, testPolicy, ptr("k2"), body("p"), func(context.Context) (*idem.Response, error) { return created(4), nil })
	if err != nil || resp.Outcome != idem.OutcomeCompleted {
		t.Errorf("after a panic: %+v %v; want completed", resp, err)
	}
}

// A duplicate of a running request gets 409 with Retry-After from the remaining lease.
func TestInProgressRetryAfter(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	p := *testPolicy
	p.Lease = 90 * time.Second
	_, err := e.store.Do(ctx, &p, ptr("k"), body("p"), func(ctx context.Context) (*idem.Response, error) {
		dup, err := e.store.Do(ctx, &p, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) {
			t.Error("duplicate ran")
			return created(2), nil
		})
		if err != nil || dup.Status != http.StatusConflict || dup.Outcome != idem.OutcomeInProgress {
			t.Fatalf("duplicate: %+v %v", dup, err)
		}
		if ra := written(t, dup).Header.Get("Retry-After"); ra != "90" && ra != "89" {
			t.Errorf("Retry-After %q, want the lease's remaining 90 s", ra)
		}
		return created(1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// With WithWait, a duplicate waits for the owner and replays its answer.
func TestWaitReplaysOwnersAnswer(t *testing.T) {
	testWaitReplaysOwnersAnswer(t, testPolicy, WithWait(10*time.Second))
}

// The operation's own wait (Policy.Wait, the marker's wait field) does the same on a
// store without WithWait.
func TestPolicyWaitReplaysOwnersAnswer(t *testing.T) {
	p := *testPolicy
	p.Wait = 10 * time.Second
	testWaitReplaysOwnersAnswer(t, &p)
}

func testWaitReplaysOwnersAnswer(t *testing.T, testPolicy *idem.Policy, opts ...Option) {
	e := newEnv(t, nil, opts...)
	ctx := context.Background()
	polled := make(chan struct{})
	var once atomic.Bool
	e.store.hookPolled = func() {
		if once.CompareAndSwap(false, true) {
			close(polled)
		}
	}
	dup := make(chan *idem.Response)
	_, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(ctx context.Context) (*idem.Response, error) {
		go func() {
			r, _ := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) {
				t.Error("duplicate ran")
				return created(2), nil
			})
			dup <- r
		}()
		<-polled // the duplicate found the key held and waits
		return created(1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := <-dup; r.Outcome != idem.OutcomeReplayed || !strings.Contains(string(r.Body), `"star": 1`) {
		t.Errorf("waiting duplicate: %s %s", r.Outcome, r.Body)
	}
}

// Scopes keep equal keys apart; a ScopeFunc's problem is the answer.
func TestScopes(t *testing.T) {
	ctx := context.Background()
	type tenant struct{}
	e := newEnv(t, nil, WithScope(func(ctx context.Context) (string, error) {
		s, _ := ctx.Value(tenant{}).(string)
		if s == "" {
			return "", &idem.Problem{Status: 401, Detail: "who are you"}
		}
		return s, nil
	}))
	var runs int
	fn := func(context.Context) (*idem.Response, error) { runs++; return created(runs), nil }
	for _, s := range []string{"a", "b", "a"} {
		if _, err := e.store.Do(context.WithValue(ctx, tenant{}, s), testPolicy, ptr("k"), body("p"), fn); err != nil {
			t.Fatal(err)
		}
	}
	if runs != 2 {
		t.Errorf("%d runs, want 2 (one per scope)", runs)
	}
	resp, _ := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), fn)
	if resp.Status != 401 {
		t.Errorf("no tenant: %d", resp.Status)
	}
}

// The Redis key is a hash tag of its own, whatever braces the scope and key hold.
func TestRedisKeyHashTag(t *testing.T) {
	for _, tc := range [][2]string{{"", "k"}, {"te{n}ant", "{key}"}, {"a", "b}c"}} {
		k := redisKey("idem:", tc[0], tc[1])
		open, end := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
		if open != len("idem:") || end != len(k)-1 || end-open-1 != 64 {
			t.Errorf("redisKey(%q, %q) = %q: want idem:{64 hex digits}", tc[0], tc[1], k)
		}
	}
	if redisKey("", "ab", "c") == redisKey("", "a", "bc") {
		t.Error("scope and key boundary is ambiguous")
	}
}

// The wait is bounded: a duplicate that waited it out without an answer gets the 409.
func TestWaitIsBounded(t *testing.T) {
	e := newEnv(t, nil, WithWait(100*time.Millisecond))
	ctx := context.Background()
	var polls atomic.Int32
	e.store.hookPolled = func() { polls.Add(1) }
	_, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(ctx context.Context) (*idem.Response, error) {
		dup, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) {
			t.Error("duplicate ran")
			return created(2), nil
		})
		if err != nil || dup.Status != http.StatusConflict || polls.Load() == 0 {
			t.Errorf("duplicate after its wait: %+v %v (%d polls); want a 409 after polling", dup, err, polls.Load())
		}
		return created(1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Retry-After never exceeds the policy's timeout: a live owner finishes (or fails) by then.
func TestRetryAfterClampedToTimeout(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	p := *testPolicy
	p.Lease, p.Timeout = time.Minute, 2*time.Second
	_, err := e.store.Do(ctx, &p, ptr("k"), body("p"), func(ctx context.Context) (*idem.Response, error) {
		dup, _ := e.store.Do(ctx, &p, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) { return created(2), nil })
		if ra := written(t, dup).Header.Get("Retry-After"); ra != "2" {
			t.Errorf("Retry-After %q, want 2 (the timeout)", ra)
		}
		return created(1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Reject and RequestErrorHandler render like the store's rejections: a body key that is
// not a string is a 400, a body over the limit a 413, with the custom renderer.
func TestRejectAndRequestErrors(t *testing.T) {
	e := newEnv(t, nil, WithRejectionRenderer(func(p idem.Problem) (string, []byte) {
		return "application/json", []byte(`{"error":"` + p.Detail + `"}`)
	}))
	resp := e.store.Reject(context.Background(), testPolicy, fmt.Errorf("%w: the body's /key is a float64, not a string", idem.ErrInvalidKey))
	if resp.Status != 400 || resp.Outcome != idem.OutcomeInvalidKey || !strings.Contains(string(resp.Body), "/key is a float64") {
		t.Errorf("Reject: %d %s %s", resp.Status, resp.Outcome, resp.Body)
	}
	rec := httptest.NewRecorder()
	e.store.RequestErrorHandler(rec, httptest.NewRequest("POST", "/", nil), &http.MaxBytesError{Limit: 10})
	if rec.Code != 413 || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("RequestErrorHandler: %d %v", rec.Code, rec.Header())
	}
	if n := e.seen.get(idem.OutcomeInvalidKey); n != 1 {
		t.Errorf("%d invalid_key outcomes, want 1", n)
	}
}
