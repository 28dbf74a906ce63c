package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// maxBody is the body limit of the service under test (the server's -max-body).
const maxBody = 2048

// badEnv is the payments service served by net/http on loopback (the handler the server
// binary serves, built in-process with the same options), with one completed payment.
type badEnv struct {
	t       *testing.T
	srv     *httptest.Server
	handler http.Handler
	d       *db
	// payment is the completed payment of key "done-1": its id, and its request body.
	paymentID string
}

const badAccount = "acct-bad"

func newBadEnv(t *testing.T) *badEnv {
	t.Helper()
	url := pgtest.NewDB(t)
	pool := pgtest.PoolWithMax(t, url, 8)
	if err := service.Setup(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	h := service.New(pool, service.Options{MaxBodyBytes: maxBody})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &badEnv{t: t, srv: srv, handler: h, d: &db{t: t, pool: pool}}
	r := pay(context.Background(), srv.URL, badAccount, "done-1")
	if !r.executed() {
		t.Fatalf("setup payment: %s", r)
	}
	e.paymentID = r.paymentID()
	return e
}

// state is everything a request could change: both business tables and every column of
// every idempotency key.
func (e *badEnv) state() string {
	e.t.Helper()
	var s string
	err := e.d.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM payments)::text || '/' || (SELECT count(*) FROM refunds)::text || '/' ||
		coalesce((SELECT string_agg(k::text, '|' ORDER BY scope, key) FROM idempotency_keys k), '')`).Scan(&s)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *badEnv) request(method, path, body string, header http.Header) reply {
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Account-ID", badAccount)
	for k, v := range header {
		req.Header[k] = v
	}
	return do(req)
}

// raw sends bytes as they are over TCP (for header values Go's client refuses to send)
// and reads one response.
func (e *badEnv) raw(keyLine string) reply {
	e.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	body := paymentBody("raw")
	fmt.Fprintf(conn, "POST /payments HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nX-Account-ID: %s\r\n%s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		badAccount, keyLine, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	_, _ = bufio.NewReader(resp.Body).WriteTo(b)
	return reply{status: resp.StatusCode, header: resp.Header, body: []byte(b.String())}
}

// direct calls the handler without net/http's request parsing, so that any byte can be
// put in a header value: what the idempotency layer does with bytes a proxy or another
// server might let through.
func (e *badEnv) direct(key string) reply {
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(paymentBody("direct")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Account-ID", badAccount)
	req.Header["Idempotency-Key"] = []string{key}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, req)
	return reply{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

func keyHeader(values ...string) http.Header { return http.Header{"Idempotency-Key": values} }

// Each bad request is answered (400, 413 or 422, as problem+json where the service
// answers) before any state changes: the business tables and every column of every
// idempotency key are the same before and after.
func TestBadInput(t *testing.T) {
	e := newBadEnv(t)
	payment := paymentBody("fresh")
	bigDesc := `{"amount":100,"currency":"EUR","description":"` + strings.Repeat("x", 900) + `"` + strings.Repeat(" ", maxBody) + `}`
	cases := []struct {
		name       string
		send       func() reply
		status     int
		problem    bool   // the answer is application/problem+json
		detail     string // in the body
		retryFresh string // when set, the same key with a good body then executes: nothing was claimed
	}{
		{"missing key", func() reply { return e.request("POST", "/payments", payment, nil) },
			400, true, "requires an idempotency key", ""},
		{"empty key", func() reply { return e.request("POST", "/payments", payment, keyHeader("")) },
			400, true, "", ""},
		{"blank key", func() reply { return e.request("POST", "/payments", payment, keyHeader("   ")) },
			400, true, "empty", ""},
		{"empty quoted key", func() reply { return e.request("POST", "/payments", payment, keyHeader(`""`)) },
			400, true, "empty", ""},
		{"256-byte key", func() reply {
			return e.request("POST", "/payments", payment, keyHeader(strings.Repeat("k", 256)))
		}, 400, true, "longer than 255", ""},
		{"256-byte quoted key", func() reply {
			return e.request("POST", "/payments", payment, keyHeader(`"`+strings.Repeat("k", 256)+`"`))
		}, 400, true, "longer than 255", ""},
		{"multi-byte key (UTF-8)", func() reply { return e.request("POST", "/payments", payment, keyHeader("clé-ключ-鍵")) },
			400, true, "not printable ASCII", ""},
		{"Latin-1 byte", func() reply { return e.request("POST", "/payments", payment, keyHeader("caf\xe9")) },
			400, true, "0xe9", ""},
		{"tab inside the key", func() reply { return e.request("POST", "/payments", payment, keyHeader("a\tb")) },
			400, true, "0x09", ""},
		{"NUL over TCP (refused by net/http)", func() reply { return e.raw("Idempotency-Key: a\x00b") },
			400, false, "", ""},
		{"control byte 0x01 over TCP (refused by net/http)", func() reply { return e.raw("Idempotency-Key: a\x01b") },
			400, false, "", ""},
		{"DEL over TCP (refused by net/http)", func() reply { return e.raw("Idempotency-Key: a\x7fb") },
			400, false, "", ""},
		{"lone CR over TCP (refused by net/http)", func() reply { return e.raw("Idempotency-Key: a\rb") },
			400, false, "", ""},
		{"UTF-8 bytes over TCP", func() reply { return e.raw("Idempotency-Key: caf\xc3\xa9") },
			400, true, "0xc3", ""},
		{"NUL at the handler", func() reply { return e.direct("a\x00b") }, 400, true, "0x00", ""},
		{"control byte 0x1b at the handler", func() reply { return e.direct("a\x1bb") }, 400, true, "0x1b", ""},
		{"CR LF at the handler", func() reply { return e.direct("a\r\nb") }, 400, true, "0x0d", ""},
		{"DEL at the handler", func() reply { return e.direct("a\x7fb") }, 400, true, "0x7f", ""},
		{"two Idempotency-Key headers, different values", func() reply {
			return e.request("POST", "/payments", payment, keyHeader("k-1", "k-2"))
		}, 400, true, "Idempotency-Key", ""},
		{"two Idempotency-Key headers, same value", func() reply {
			return e.request("POST", "/payments", payment, keyHeader("k-1", "k-1"))
		}, 400, true, "Idempotency-Key", ""},
		{"two values in one header line", func() reply { return e.request("POST", "/payments", payment, keyHeader("k-1, k-2")) },
			400, true, "more than one value", ""},
		{"two quoted values in one line", func() reply {
			return e.request("POST", "/payments", payment, keyHeader(`"k-1", "k-2"`))
		}, 400, true, "more than one value", ""},
		{"unterminated quoted key", func() reply { return e.request("POST", "/payments", payment, keyHeader(`"k-1`)) },
			400, true, "unterminated", ""},
		{"body over the limit (413 before the claim)", func() reply {
			return e.request("POST", "/payments", bigDesc, keyHeader("big-1"))
		}, 413, true, "", "big-1"},
		{"malformed JSON", func() reply {
			return e.request("POST", "/payments", `{"amount": 100, "currency": "EUR"`, keyHeader("malformed-1"))
		}, 400, true, "", "malformed-1"},
		{"JSON of the wrong type", func() reply {
			return e.request("POST", "/payments", `{"amount": "100", "currency": "EUR"}`, keyHeader("wrongtype-1"))
		}, 400, true, "", "wrongtype-1"},
		{"invalid payment (validation before the claim)", func() reply {
			return e.request("POST", "/payments", `{"amount": 0, "currency": "EUR"}`, keyHeader("invalid-1"))
		}, 400, true, "amount", "invalid-1"},
		{"key reused with a different body", func() reply {
			return e.request("POST", "/payments", `{"amount":999,"currency":"EUR"}`, keyHeader("done-1"))
		}, 422, true, "different request payload", ""},
		{"key reused on another operation", func() reply {
			return e.request("POST", "/payments/"+e.paymentID+"/refunds", `{"amount":1}`, keyHeader("done-1"))
		}, 422, true, "another operation (createPayment)", ""},
		{"no account", func() reply {
			req, _ := http.NewRequest("POST", e.srv.URL+"/payments", strings.NewReader(payment))
			req.Header.Set("Idempotency-Key", "noacct-1")
			return do(req)
		}, 401, true, "X-Account-ID", ""},
	}
	total := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			e.d.t = t
			before := e.state()
			r := c.send()
			total++
			if r.err != nil {
				t.Fatalf("transport error: %v", r.err)
			}
			if r.status != c.status {
				t.Errorf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); c.problem && ct != "application/problem+json" {
				t.Errorf("Content-Type %q, want application/problem+json: %s", ct, r.body)
			}
			if c.problem {
				var p struct {
					Status int `json:"status"`
				}
				if err := json.Unmarshal(r.body, &p); err != nil || p.Status != c.status {
					t.Errorf("problem body %s: status %d, %v", r.body, p.Status, err)
				}
			}
			if !strings.Contains(string(r.body), c.detail) {
				t.Errorf("body %s does not say %q", r.body, c.detail)
			}
			if after := e.state(); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
			if c.retryFresh != "" {
				good := pay(context.Background(), e.srv.URL, badAccount, c.retryFresh)
				total++
				if !good.executed() {
					t.Errorf("the same key with a good body: %s, want an execution (the bad request claimed nothing)", good)
				}
			}
		})
	}
	e.t = t
	e.d.t = t
	if n := e.d.int(`SELECT count(*) FROM payments WHERE idempotency_key = 'done-1'`); n != 1 {
		t.Errorf("%d payments for done-1, want 1", n)
	}
	verdict := "PASS"
	if t.Failed() {
		verdict = "FAIL"
	}
	t.Logf("RESULT TestBadInput %s: %d cases, %d requests; state unchanged by every bad request; duplicates: 0, lost: 0", verdict, len(cases), total)
}

// Boundaries that must be accepted: 255 bytes, the quoted form with escapes (a key with
// a comma is one value when quoted), surrounding blanks. The quoted and the bare form of
// one key are the same key.
func TestGoodKeyBoundaries(t *testing.T) {
	e := newBadEnv(t)
	long := strings.Repeat("k", 255)
	for _, c := range []struct{ name, header, key string }{
		{"255 bytes", long, long},
		{"255 bytes quoted", quoted(strings.Repeat("q", 255)), strings.Repeat("q", 255)},
		{"quoted with escapes and a comma", `"a\"b\\c,d"`, `a"b\c,d`},
		{"surrounding blanks", " \tblank-1\t ", "blank-1"},
		{"every printable byte, quoted", quoted(printableASCII()), printableASCII()}, // the space inside
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.request("POST", "/payments", paymentBody("x"), keyHeader(c.header))
			if !r.executed() {
				t.Fatalf("%s", r)
			}
			if n := e.d.int(`SELECT count(*) FROM payments WHERE idempotency_key = $1`, c.key); n != 1 {
				t.Errorf("%d payments stored under %q, want 1", n, c.key)
			}
		})
	}
	// The bare and the quoted form name one key: the second is a replay.
	first := e.request("POST", "/payments", paymentBody("y"), keyHeader("same-1"))
	second := e.request("POST", "/payments", paymentBody("y"), keyHeader(`"same-1"`))
	if !first.executed() || !second.replayed() || string(first.body) != string(second.body) {
		t.Errorf("bare then quoted: %s, then %s; want an execution and its replay", first, second)
	}
}

// printableASCII is every byte from 0x20 to 0x7E: the widest valid key.
// printableASCII is every printable ASCII byte, 0x20-0x7E, in order, but with the space
// after the "!": a key may not begin or end with a space.
func printableASCII() string {
	var b strings.Builder
	b.WriteString("! ")
	for c := byte(0x22); c <= 0x7e; c++ {
		b.WriteByte(c)
	}
	return b.String()
}

// quoted is the RFC 8941 sf-string form of key.
func quoted(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

// The sessions server (testdata/sessions) answers 201 with a Set-Cookie header and a Link
// header whose one value holds commas. The first answer carries both; a retry with the
// key replays the status, the body and Link byte for byte, and never the cookie, which is
// not stored either.
func TestReplayDropsSetCookieKeepsCommas(t *testing.T) {
	_, bin := servers(t)
	url := pgtest.NewDB(t)
	srv := startProc(t, "sessions", bin, url)
	d := openDB(t, url)
	post := func() reply {
		req, _ := http.NewRequest("POST", srv.url+"/sessions", strings.NewReader(`{"user":"ada"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "session-1")
		return do(req)
	}
	const link = `</sessions/1>; rel="self", </sessions>; rel="collection"`
	first := post()
	if !first.executed() || first.status != http.StatusCreated || first.header.Get("Link") != link {
		t.Fatalf("first: %s %v", first, first.header)
	}
	// The client whose request ran gets the whole answer its handler wrote, cookie
	// included: only the stored copy, which retries replay, goes without it.
	t.Run("the executed answer carries its Set-Cookie", func(t *testing.T) {
		if first.header.Get("Set-Cookie") == "" {
			t.Errorf("the executed (not replayed) answer lost the Set-Cookie its handler wrote; headers: %v", first.header)
		}
	})
	var replays int
	for range 3 {
		r := post()
		replays++
		if !r.replayed() || r.status != first.status || string(r.body) != string(first.body) {
			t.Fatalf("retry: %s, want a replay of %s", r, first)
		}
		if v := r.header.Values("Set-Cookie"); len(v) != 0 {
			t.Errorf("the replay carries Set-Cookie %q", v)
		}
		if v := r.header.Values("Link"); len(v) != 1 || v[0] != link {
			t.Errorf("replayed Link %q, want exactly %q", v, link)
		}
	}
	if n := d.int(`SELECT count(*) FROM idempotency_keys WHERE response_headers::text ILIKE '%set-cookie%' OR response_headers::text LIKE '%secret%'`); n != 0 {
		t.Errorf("%d stored responses hold the cookie", n)
	}
	if n := d.int(`SELECT count(*) FROM sessions`); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
	verdict := "PASS"
	if t.Failed() {
		verdict = "FAIL"
	}
	t.Logf("RESULT %s %s: 1 key; %d requests: 1 executed, %d replayed (Set-Cookie never replayed nor stored, Link intact); duplicates: 0, lost: 0", t.Name(), verdict, 1+replays, replays)
}
