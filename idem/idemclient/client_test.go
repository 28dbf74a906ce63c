package idemclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem/idemclient"
)

// seen is one attempt as the server received it.
type seen struct {
	key  string // the Idempotency-Key header
	body []byte
	ct   string
}

// script is an httptest server that answers attempt i with steps[i] (the last step
// repeats) and records every attempt.
type script struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   []seen
	steps []func(w http.ResponseWriter, r *http.Request)
}

func newScript(t *testing.T, steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	t.Helper()
	s := &script{steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		i := len(s.got)
		s.got = append(s.got, seen{key: r.Header.Get("Idempotency-Key"), body: body, ct: r.Header.Get("Content-Type")})
		step := s.steps[min(i, len(s.steps)-1)]
		s.mu.Unlock()
		step(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *script) attempts() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.got...)
}

// status answers code with headers given as name, value pairs.
func status(code int, headers ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"status":%d}`, code)
	}
}

// drop closes the connection without an answer: the request reached the server, the
// response is lost.
func drop(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// cut sends the status line and half a body, then closes the connection.
func cut(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	buf.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{\"id\":")
	buf.Flush()
	conn.Close()
}

// waits records the client's waits instead of sleeping.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func newClient(w *waits) *idemclient.Client {
	c := &idemclient.Client{}
	if w != nil {
		idemclient.SetSleep(c, w.sleep)
	}
	return c
}

var header = idemclient.Key{Header: "Idempotency-Key"}

func post(t *testing.T, url, ct string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	return req
}

func TestRetriesTransportErrorsWithTheSameKey(t *testing.T) {
	s := newScript(t, drop, cut, status(201))
	var w waits
	resp, res, err := newClient(&w).Do(context.Background(), post(t, s.srv.URL, "application/json", strings.NewReader(`{"amount":1}`)), header)
	if err != nil {
		t.Fatal(err)
	}
	got := s.attempts()
	if len(got) != 3 || res.Attempts != 3 || resp.StatusCode != 201 || res.Status != 201 || res.Replayed || res.Retryable {
		t.Fatalf("server saw %d attempts; result %+v, status %d", len(got), res, resp.StatusCode)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != `{"status":201}` {
		t.Errorf("body %q", b)
	}
	for i, a := range got {
		if a.key != res.Key {
			t.Errorf("attempt %d key %q, want %q", i+1, a.key, res.Key)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(res.Key) {
		t.Errorf("minted key %q is not a lowercase UUID v4", res.Key)
	}
	if len(w.d) != 2 {
		t.Errorf("waits %v, want 2", w.d)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	for _, c := range []struct {
		name  string
		code  int
		after string
		min   time.Duration
	}{
		{"409 seconds", 409, "2", 2 * time.Second},
		{"429 seconds", 429, "1", time.Second},
		{"503 seconds", 503, "3", 3 * time.Second},
		{"408 seconds", 408, "1", time.Second},
		{"409 date", 409, time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat), 8 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScript(t, status(c.code, "Retry-After", c.after), status(201))
			var w waits
			cl := newClient(&w)
			cl.BaseDelay, cl.MaxDelay = 10*time.Millisecond, 10*time.Millisecond
			_, res, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), header)
			if err != nil {
				t.Fatal(err)
			}
			if res.Attempts != 2 || res.Status != 201 {
				t.Fatalf("result %+v", res)
			}
			// Retry-After plus the full-jitter backoff (at most MaxDelay).
			if len(w.d) != 1 || w.d[0] < c.min || w.d[0] > c.min+2*time.Second+10*time.Millisecond {
				t.Errorf("waited %v, want Retry-After %s (%v) plus at most 10ms", w.d, c.after, c.min)
			}
			if res.Waited != w.d[0] {
				t.Errorf("Result.Waited %v, want %v", res.Waited, w.d[0])
			}
		})
	}
}

// TestRetryAfterTooLong: an answer asking for a longer wait than MaxRetryAfter is
// returned, not waited for.
func TestRetryAfterTooLong(t *testing.T) {
	s := newScript(t, status(409, "Retry-After", "120"), status(201))
	var w waits
	cl := newClient(&w)
	resp, res, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), header)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 409 || res.Attempts != 1 || res.Retryable || len(w.d) != 0 {
		t.Fatalf("status %d, result %+v, waits %v", resp.StatusCode, res, w.d)
	}
}

func TestBackoffBounded(t *testing.T) {
	s := newScript(t, status(503))
	var w waits
	cl := newClient(&w)
	cl.MaxAttempts, cl.BaseDelay, cl.MaxDelay = 8, 100*time.Millisecond, time.Second
	idemclient.SetRand(cl, func() float64 { return 0.999999 })
	resp, res, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), header)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || res.Attempts != 8 || !res.Retryable || len(s.attempts()) != 8 {
		t.Fatalf("status %d, result %+v, server saw %d", resp.StatusCode, res, len(s.attempts()))
	}
	caps := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	if len(w.d) != len(caps) {
		t.Fatalf("waits %v, want %d", w.d, len(caps))
	}
	for i, d := range w.d {
		c := caps[i] * time.Millisecond
		if got := idemclient.BackoffCap(cl, i+1); got != c {
			t.Errorf("cap after attempt %d = %v, want %v", i+1, got, c)
		}
		if d > c || d < c*99/100 {
			t.Errorf("wait %d = %v, want just under its cap %v", i+1, d, c)
		}
	}
	// Full jitter: the wait is uniform from 0, not from the cap's half.
	idemclient.SetRand(cl, func() float64 { return 0 })
	w.d = nil
	if _, _, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), header, idemclient.WithMaxAttempts(3)); err != nil {
		t.Fatal(err)
	}
	if len(w.d) != 2 || w.d[0] != 0 || w.d[1] != 0 {
		t.Errorf("waits with jitter 0: %v, want [0 0]", w.d)
	}
	// A huge attempt count does not overflow the cap.
	if got := idemclient.BackoffCap(cl, 1000); got != time.Second {
		t.Errorf("cap after attempt 1000 = %v", got)
	}
}

func TestFinalStatusesNotRetried(t *testing.T) {
	for _, code := range []int{200, 201, 400, 401, 404, 413, 422, 301} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			s := newScript(t, status(code), status(201))
			var w waits
			resp, res, err := newClient(&w).Do(context.Background(), post(t, s.srv.URL, "application/json", strings.NewReader(`{}`)), header)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != code || res.Attempts != 1 || len(s.attempts()) != 1 || res.Retryable || len(w.d) != 0 {
				t.Errorf("status %d, result %+v, server saw %d attempts", resp.StatusCode, res, len(s.attempts()))
			}
		})
	}
}

// TestReplayedAnswersFinal: a replayed 5xx (or 409) is the stored answer of the key: a
// retry would get it again. A 5xx not stored is retried.
func TestReplayedAnswersFinal(t *testing.T) {
	for _, code := range []int{500, 503, 409} {
		s := newScript(t, status(code, idemclient.ReplayedHeader, "true"), status(201))
		resp, res, err := newClient(&waits{}).Do(context.Background(), post(t, s.srv.URL, "", nil), header)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != code || res.Attempts != 1 || !res.Replayed || res.Retryable {
			t.Errorf("replayed %d: status %d, result %+v", code, resp.StatusCode, res)
		}
	}
	s := newScript(t, status(500), status(502), status(200, idemclient.ReplayedHeader, "true"))
	resp, res, err := newClient(&waits{}).Do(context.Background(), post(t, s.srv.URL, "", nil), header)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || res.Attempts != 3 || !res.Replayed {
		t.Errorf("500, 502, replayed 200: status %d, result %+v", resp.StatusCode, res)
	}
}

func TestContextDeadline(t *testing.T) {
	t.Run("a wait past the deadline is not started", func(t *testing.T) {
		s := newScript(t, status(409, "Retry-After", "5"), status(201))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		resp, res, err := (&idemclient.Client{}).Do(ctx, post(t, s.srv.URL, "", nil), header)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 409 || res.Attempts != 1 || !res.Retryable {
			t.Errorf("status %d, result %+v", resp.StatusCode, res)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("returned after %v: it waited for a retry the deadline forbids", d)
		}
	})
	t.Run("an attempt in flight ends with the deadline", func(t *testing.T) {
		release := make(chan struct{})
		s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		resp, res, err := (&idemclient.Client{}).Do(ctx, post(t, s.srv.URL, "", nil), header)
		var ce *idemclient.CallError
		if resp != nil || !errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("resp %v, err %v: want a CallError wrapping the deadline", resp, err)
		}
		if res.Attempts != 1 || ce.Result.Key != res.Key || res.Key == "" {
			t.Errorf("result %+v, error's %+v", res, ce.Result)
		}
	})
	t.Run("a cancelled wait ends the call", func(t *testing.T) {
		s := newScript(t, status(503))
		ctx, cancel := context.WithCancel(context.Background())
		cl := &idemclient.Client{}
		idemclient.SetSleep(cl, func(context.Context, time.Duration) error { cancel(); return context.Canceled })
		_, res, err := cl.Do(ctx, post(t, s.srv.URL, "", nil), header)
		if !errors.Is(err, context.Canceled) || res.Attempts != 1 {
			t.Errorf("err %v, result %+v", err, res)
		}
	})
	t.Run("an attempt past AttemptTimeout is retried", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}, status(201))
		cl := newClient(&waits{})
		cl.AttemptTimeout = 100 * time.Millisecond
		resp, res, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), header)
		if err != nil || resp.StatusCode != 201 || res.Attempts != 2 {
			t.Fatalf("err %v, result %+v", err, res)
		}
	})
}

func TestAttemptsExhaustedByTransportErrors(t *testing.T) {
	s := newScript(t, drop)
	cl := newClient(&waits{})
	cl.MaxAttempts = 3
	resp, res, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), header)
	var ce *idemclient.CallError
	if resp != nil || !errors.As(err, &ce) || res.Attempts != 3 || len(s.attempts()) != 3 || !res.Retryable {
		t.Fatalf("resp %v, err %v, result %+v", resp, err, res)
	}
	if !strings.Contains(err.Error(), "3 attempt(s)") || !strings.Contains(err.Error(), res.Key) {
		t.Errorf("error %q does not say the attempts and the key", err)
	}
}

// TestBodyByteIdentical: every attempt carries the same bytes: a JSON body (with the key
// in a header, and with the key put in the body), a multipart body given as a plain
// reader (no GetBody), raw bytes, a form.
func TestBodyByteIdentical(t *testing.T) {
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("receipt", "r.pdf")
	fw.Write([]byte("%PDF-1.7 \x00\x01\x02 binary"))
	mw.WriteField("note", "lunch")
	mw.Close()
	raw := []byte{0, 1, 2, 0xff, 0xfe, '\n', '\r'}
	for _, c := range []struct {
		name, ct string
		body     func() io.Reader
		key      idemclient.Key
		want     func(key string) string
	}{
		{"json", "application/json", func() io.Reader { return strings.NewReader(`{"b": 2, "a": [1, 2.50]}`) }, header,
			func(string) string { return `{"b": 2, "a": [1, 2.50]}` }},
		{"json key in body", "application/json", func() io.Reader { return bytes.NewReader([]byte(`{"b":2,"a":{"x":1.50},"note":"<&>"}`)) },
			idemclient.Key{JSONPointer: "/meta/idempotency_key"},
			func(k string) string {
				return `{"a":{"x":1.50},"b":2,"meta":{"idempotency_key":"` + k + `"},"note":"<&>"}`
			}},
		{"multipart reader", mw.FormDataContentType(), func() io.Reader { return io.MultiReader(bytes.NewReader(mp.Bytes())) }, header,
			func(string) string { return mp.String() }},
		{"raw", "application/octet-stream", func() io.Reader { return io.NopCloser(bytes.NewReader(raw)) }, header,
			func(string) string { return string(raw) }},
		{"form key", "application/x-www-form-urlencoded", func() io.Reader { return strings.NewReader("b=2&a=1") },
			idemclient.Key{FormField: "idempotency_key"},
			func(k string) string { return "a=1&b=2&idempotency_key=" + k }},
		// A key place for each body: the content type picks.
		{"form or json, form sent", "application/x-www-form-urlencoded; charset=utf-8", func() io.Reader { return strings.NewReader("a=1") },
			idemclient.Key{JSONPointer: "/idempotency_key", FormField: "idempotency_key"},
			func(k string) string { return "a=1&idempotency_key=" + k }},
		{"form or json, json sent", "application/json", func() io.Reader { return strings.NewReader(`{"a":1}`) },
			idemclient.Key{JSONPointer: "/idempotency_key", FormField: "idempotency_key"},
			func(k string) string { return `{"a":1,"idempotency_key":"` + k + `"}` }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScript(t, drop, status(503), cut, status(201))
			_, res, err := newClient(&waits{}).Do(context.Background(), post(t, s.srv.URL, c.ct, c.body()), c.key)
			if err != nil {
				t.Fatal(err)
			}
			got := s.attempts()
			if len(got) != 4 || res.Attempts != 4 {
				t.Fatalf("%d attempts", len(got))
			}
			want := c.want(res.Key)
			for i, a := range got {
				if string(a.body) != want || a.ct != c.ct {
					t.Errorf("attempt %d: body %q (%s)\nwant %q", i+1, a.body, a.ct, want)
				}
				if c.key.Header != "" && a.key != res.Key {
					t.Errorf("attempt %d: key %q, want %q", i+1, a.key, res.Key)
				}
			}
		})
	}
}

func TestKeySources(t *testing.T) {
	s := newScript(t, status(201))
	cl := newClient(&waits{})
	do := func(ctx context.Context, req *http.Request, k idemclient.Key, opts ...idemclient.Option) (*idemclient.Result, error) {
		_, res, err := cl.Do(ctx, req, k, opts...)
		return res, err
	}
	req := post(t, s.srv.URL, "", nil)
	req.Header.Set("Idempotency-Key", "own")
	if res, err := do(idemclient.ContextWithKey(context.Background(), "ctx"), req, header, idemclient.WithKey("opt")); err != nil || res.Key != "own" {
		t.Errorf("the request's own key: %v %+v", err, res)
	}
	if res, err := do(idemclient.ContextWithKey(context.Background(), "ctx"), post(t, s.srv.URL, "", nil), header, idemclient.WithKey("opt")); err != nil || res.Key != "opt" {
		t.Errorf("the option's key: %v %+v", err, res)
	}
	if res, err := do(idemclient.ContextWithKey(context.Background(), "ctx"), post(t, s.srv.URL, "", nil), header); err != nil || res.Key != "ctx" {
		t.Errorf("the context's key: %v %+v", err, res)
	}
	body := post(t, s.srv.URL, "application/json", strings.NewReader(`{"idempotency_key":"in-body"}`))
	if res, err := do(context.Background(), body, idemclient.Key{JSONPointer: "/idempotency_key"}, idemclient.WithKey("opt")); err != nil || res.Key != "in-body" {
		t.Errorf("the body's own key: %v %+v", err, res)
	}
	if got := s.attempts(); got[0].key != "own" || got[1].key != "opt" || got[2].key != "ctx" || string(got[3].body) != `{"idempotency_key":"in-body"}` {
		t.Errorf("the server saw %+v", got)
	}
	// Under format uuid, the nil UUID (what an unset uuid field encodes to) is no key.
	uuidKey := idemclient.Key{Header: "Idempotency-Key", Format: "uuid"}
	zero := post(t, s.srv.URL, "", nil)
	zero.Header.Set("Idempotency-Key", "00000000-0000-0000-0000-000000000000")
	if res, err := do(context.Background(), zero, uuidKey); err != nil || res.Key == "00000000-0000-0000-0000-000000000000" || len(res.Key) != 36 {
		t.Errorf("the nil UUID: %v %+v", err, res)
	}
	zeroBody := post(t, s.srv.URL, "application/json", strings.NewReader(`{"k":"00000000-0000-0000-0000-000000000000"}`))
	if res, err := do(context.Background(), zeroBody, idemclient.Key{JSONPointer: "/k", Format: "uuid"}, idemclient.WithKey("5f0c5ad6-2b1e-4c3a-9d4e-7a8b9c0d1e2f")); err != nil || res.Key != "5f0c5ad6-2b1e-4c3a-9d4e-7a8b9c0d1e2f" {
		t.Errorf("the nil UUID in the body: %v %+v", err, res)
	}
	if got := s.attempts(); len(got[len(got)-2].key) != 36 || got[len(got)-2].key == "00000000-0000-0000-0000-000000000000" || string(got[len(got)-1].body) != `{"k":"5f0c5ad6-2b1e-4c3a-9d4e-7a8b9c0d1e2f"}` {
		t.Errorf("the server saw %+v", got[len(got)-2:])
	}
	// A hook mints the keys.
	n := 0
	cl.NewKey = func() (string, error) { n++; return fmt.Sprintf("order-%d", n), nil }
	if res, err := do(context.Background(), post(t, s.srv.URL, "", nil), header); err != nil || res.Key != "order-1" {
		t.Errorf("the hook's key: %v %+v", err, res)
	}
	cl.NewKey = func() (string, error) { return "", errors.New("no entropy") }
	if _, err := do(context.Background(), post(t, s.srv.URL, "", nil), header); err == nil || !strings.Contains(err.Error(), "no entropy") {
		t.Errorf("the hook's error: %v", err)
	}
}

// TestKeyConstraints: a key the spec's schema forbids fails before any request; the
// minted key fits the spec's maxLength.
func TestKeyConstraints(t *testing.T) {
	s := newScript(t, status(201))
	cl := newClient(&waits{})
	for _, c := range []struct {
		key  idemclient.Key
		opt  string
		want string
	}{
		{idemclient.Key{Header: "Idempotency-Key", Format: "uuid"}, "not-a-uuid", "is not a UUID"},
		{idemclient.Key{Header: "Idempotency-Key", MaxLength: 4}, "12345", "longer than the spec's maxLength 4"},
		{idemclient.Key{Header: "Idempotency-Key", MinLength: 8}, "1234", "shorter than the spec's minLength 8"},
		{idemclient.Key{Header: "Idempotency-Key", Pattern: "^ord_[a-z]+$"}, "ord_1", `does not match the spec's pattern "^ord_[a-z]+$"`},
		{idemclient.Key{Header: "Idempotency-Key"}, "tab\there", "not printable ASCII"},
		{idemclient.Key{Header: "Idempotency-Key"}, strings.Repeat("k", 256), "1 to 255 bytes"},
		{idemclient.Key{Header: "Idempotency-Key", JSONPointer: "/k"}, "k", "a Header, or a body place"},
		// ECMA-262, as OpenAPI defines pattern: lookahead included (RE2 refuses it).
		{idemclient.Key{Header: "Idempotency-Key", Pattern: "^(?!test)[a-z0-9-]+$"}, "test-1", `does not match the spec's pattern "^(?!test)[a-z0-9-]+$"`},
	} {
		_, _, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), c.key, idemclient.WithKey(c.opt))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("key %q under %+v: err %v, want %q", c.opt, c.key, err, c.want)
		}
	}
	if n := len(s.attempts()); n != 0 {
		t.Errorf("the server saw %d requests with invalid keys", n)
	}
	if _, res, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), idemclient.Key{Header: "Idempotency-Key", Pattern: "^(?!test)[a-z0-9-]+$"}, idemclient.WithKey("prod-1")); err != nil || res.Key != "prod-1" {
		t.Errorf("an ECMA-262 lookahead pattern: %v", err)
	}
	_, res, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), idemclient.Key{Header: "Idempotency-Key", MaxLength: 20})
	if err != nil || len(res.Key) != 20 {
		t.Errorf("minted under maxLength 20: %v, key %q", err, res.Key)
	}
	_, res, err = cl.Do(context.Background(), post(t, s.srv.URL, "", nil), idemclient.Key{Header: "Idempotency-Key", Format: "uuid", MaxLength: 36})
	if err != nil || len(res.Key) != 36 {
		t.Errorf("minted uuid: %v, key %q", err, res.Key)
	}
}

// TestRequestEditors run on every attempt; an editor's error fails the call unretried.
func TestRequestEditors(t *testing.T) {
	s := newScript(t, status(503), status(201))
	n := 0
	edit := idemclient.WithRequestEditor(func(ctx context.Context, req *http.Request) error {
		n++
		req.Header.Set("Authorization", "Bearer t")
		return nil
	})
	if _, res, err := newClient(&waits{}).Do(context.Background(), post(t, s.srv.URL, "", nil), header, edit); err != nil || res.Attempts != 2 || n != 2 {
		t.Fatalf("err %v, result %+v, editor ran %d times", err, res, n)
	}
	failing := idemclient.WithRequestEditor(func(context.Context, *http.Request) error { return errors.New("no token") })
	if _, res, err := newClient(&waits{}).Do(context.Background(), post(t, s.srv.URL, "", nil), header, failing); err == nil || err.Error() != "no token" || res.Attempts != 1 {
		t.Errorf("err %v, result %+v", err, res)
	}
}

func TestOnAttempt(t *testing.T) {
	s := newScript(t, drop, status(409, "Retry-After", "0"), status(201, idemclient.ReplayedHeader, "true"))
	cl := newClient(&waits{})
	var got []idemclient.Attempt
	cl.OnAttempt = func(a idemclient.Attempt) { got = append(got, a) }
	_, res, err := cl.Do(context.Background(), post(t, s.srv.URL, "", nil), header)
	if err != nil || len(got) != 3 {
		t.Fatalf("err %v, attempts %+v", err, got)
	}
	if got[0].Err == nil || got[1].Status != 409 || got[2].Status != 201 || !got[2].Replayed || got[2].N != 3 || got[2].Key != res.Key {
		t.Errorf("attempts %+v", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true}, {" 7 ", 7 * time.Second, true}, {"", 0, false}, {"-1", 0, false}, {"soon", 0, false}, {"1.5", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		if got, ok := idemclient.RetryAfter(c.v, now); got != c.want || ok != c.ok {
			t.Errorf("Retry-After %q = %v, %v; want %v, %v", c.v, got, ok, c.want, c.ok)
		}
	}
}
