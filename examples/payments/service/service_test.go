package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// env is one service on its own database, served by httptest.
type env struct {
	t      *testing.T
	srv    *httptest.Server
	pool   *pgxpool.Pool
	client *http.Client
}

func newEnv(t *testing.T, opts service.Options) *env {
	t.Helper()
	ctx := context.Background()
	pool := idemtest.PoolWithMax(t, idemtest.NewDB(t), 24)
	if err := service.Setup(ctx, pool); err != nil {
		t.Fatal(err)
	}
	opts.Logf = t.Logf
	srv := httptest.NewServer(service.New(pool, opts))
	t.Cleanup(srv.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 100
	client := &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return &env{t: t, srv: srv, pool: pool, client: client}
}

// response is what a request got.
type response struct {
	status int
	header http.Header
	body   string
}

func (r response) replayed() bool { return r.header.Get(idem.ReplayedHeader) == "true" }

func (r response) String() string {
	return fmt.Sprintf("%d %v %s", r.status, r.header, r.body)
}

// req describes a request; empty account or key leaves the header out.
type req struct {
	method, path, account, key, body string
}

func (e *env) prepare(r req) *http.Request {
	hr, err := http.NewRequest(r.method, e.srv.URL+r.path, strings.NewReader(r.body))
	if err != nil {
		e.t.Fatal(err)
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.account != "" {
		hr.Header.Set(service.AccountHeader, r.account)
	}
	if r.key != "" {
		hr.Header.Set("Idempotency-Key", r.key)
	}
	return hr
}

// send sends a prepared request. It reports errors with t.Error: safe in goroutines.
func (e *env) send(hr *http.Request) response {
	resp, err := e.client.Do(hr)
	if err != nil {
		e.t.Error(err)
		return response{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Error(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

func (e *env) do(r req) response { return e.send(e.prepare(r)) }

// concurrently sends n copies of r, released together once all are built, and returns
// the responses.
func (e *env) concurrently(n int, r req) []response {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	out := make([]response, n)
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			hr := e.prepare(r)
			ready.Done()
			<-start
			out[i] = e.send(hr)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return out
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) audit() *service.AuditReport {
	e.t.Helper()
	rep, err := service.Audit(context.Background(), e.pool)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func payment(amount int64, currency string) string {
	return fmt.Sprintf(`{"amount":%d,"currency":%q}`, amount, currency)
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	return v
}

type paymentJSON struct {
	ID          string    `json:"id"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	Description *string   `json:"description"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

type problemJSON struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// wantProblem checks r is a problem+json answer with status.
func wantProblem(t *testing.T, what string, r response, status int) problemJSON {
	t.Helper()
	if r.status != status || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%s: got %s, want a %d problem", what, r, status)
	}
	p := decode[problemJSON](t, r.body)
	if p.Status != status || p.Title == "" {
		t.Fatalf("%s: problem %+v, want status %d and a title", what, p, status)
	}
	return p
}

// 50 concurrent duplicates while the first runs for 200ms: one execution, one row, the
// rest 409 with Retry-After (or byte-identical replays); afterwards, retries replay.
func TestConcurrentDuplicates(t *testing.T) {
	e := newEnv(t, service.Options{Delay: 200 * time.Millisecond})
	r := req{"POST", "/payments", "acct_a", "order-42", `{"amount":2500,"currency":"EUR","description":"order 42"}`}

	const n = 50
	var first *response
	var conflicts, replays []response
	for _, resp := range e.concurrently(n, r) {
		switch {
		case resp.status == http.StatusCreated && !resp.replayed():
			if first != nil {
				t.Fatalf("two executions:\n%s\n%s", first, resp)
			}
			first = &resp
		case resp.status == http.StatusCreated:
			replays = append(replays, resp)
		case resp.status == http.StatusConflict:
			wantProblem(t, "duplicate", resp, http.StatusConflict)
			if ra := resp.header.Get("Retry-After"); ra == "" {
				t.Errorf("409 without Retry-After: %s", resp)
			}
			conflicts = append(conflicts, resp)
		default:
			t.Errorf("unexpected answer: %s", resp)
		}
	}
	if first == nil {
		t.Fatal("no execution among the 50 duplicates")
	}
	if got := 1 + len(conflicts) + len(replays); got != n {
		t.Fatalf("%d answers accounted for, want %d", got, n)
	}
	t.Logf("50 duplicates: 1 created, %d in progress (409), %d replays", len(conflicts), len(replays))
	for _, rp := range replays {
		if rp.body != first.body || rp.header.Get("Location") != first.header.Get("Location") {
			t.Errorf("replay differs from the original:\n%s\n%s", rp, first)
		}
	}
	p := decode[paymentJSON](t, first.body)
	if loc := first.header.Get("Location"); loc != "/payments/"+p.ID {
		t.Errorf("Location %q, want /payments/%s", loc, p.ID)
	}
	if p.Amount != 2500 || p.Currency != "EUR" || p.Description == nil || *p.Description != "order 42" || p.Status != "succeeded" || p.CreatedAt.IsZero() {
		t.Errorf("payment %+v", p)
	}
	if c := e.count(`SELECT count(*) FROM payments`); c != 1 {
		t.Fatalf("%d payments rows, want 1", c)
	}

	// The first has completed: every retry, sequential or concurrent, replays it.
	for i, rp := range append([]response{e.do(r)}, e.concurrently(10, r)...) {
		if rp.status != http.StatusCreated || !rp.replayed() || rp.body != first.body || rp.header.Get("Location") != first.header.Get("Location") {
			t.Errorf("retry %d after completion: %s, want a replay of %s", i, rp, first)
		}
	}
	if c := e.count(`SELECT count(*) FROM payments`); c != 1 {
		t.Fatalf("%d payments rows, want 1", c)
	}
	// And the payment reads back as created.
	got := e.do(req{"GET", "/payments/" + p.ID, "acct_a", "", ""})
	if got.status != http.StatusOK || got.body != first.body {
		t.Errorf("GET: %s, want the body of %s", got, first)
	}
	if rep := e.audit(); !rep.OK() || rep.Payments.Rows != 1 {
		t.Errorf("audit:\n%s", rep)
	}
}

// While the first request is inside its transaction (held there by the test, not by a
// sleep), every duplicate is answered 409 with Retry-After at once: none waits for the
// first to finish. Exact counts: 1 execution, 49 conflicts, 0 replays.
func TestDuplicatesAnsweredWhileInFlight(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	var runs atomic.Int32
	e := newEnv(t, service.Options{Downstream: func(ctx context.Context) error {
		runs.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	r := req{"POST", "/payments", "acct_a", "held", payment(990, "EUR")}

	const n = 50
	var ready sync.WaitGroup
	start := make(chan struct{})
	answers := make(chan response, n)
	for range n {
		ready.Add(1)
		go func() {
			hr := e.prepare(r)
			ready.Done()
			<-start
			answers <- e.send(hr)
		}()
	}
	ready.Wait()
	close(start)
	// The first request is held in its transaction, so the other 49 must all answer now.
	// (5s is far below the policy's 10s timeout, which would end the wait anyway.)
	timeout := time.After(5 * time.Second)
	for i := range n - 1 {
		select {
		case a := <-answers:
			wantProblem(t, "duplicate of a request in flight", a, http.StatusConflict)
			if a.header.Get("Retry-After") == "" {
				t.Errorf("409 without Retry-After: %s", a)
			}
		case <-timeout:
			t.Fatalf("only %d of %d duplicates answered while the first request was in flight: duplicates wait for it", i, n-1)
		}
	}
	if c := e.count(`SELECT count(*) FROM payments`); c != 0 {
		t.Errorf("%d payments visible before the first request committed", c)
	}
	unblock()
	first := <-answers
	if first.status != http.StatusCreated || first.replayed() {
		t.Fatalf("the held request: %s", first)
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("business ran %d times, want 1", got)
	}
	if after := e.do(r); after.status != http.StatusCreated || !after.replayed() || after.body != first.body {
		t.Errorf("retry after completion: %s", after)
	}
	if c := e.count(`SELECT count(*) FROM payments`); c != 1 {
		t.Errorf("%d payments, want 1", c)
	}
}

// 1,000 keys × 5 concurrent duplicates: exactly 1,000 payments, and the audit finds no
// orphan in either direction.
func TestManyKeys(t *testing.T) {
	e := newEnv(t, service.Options{})
	const keys, dups, parallelKeys = 1000, 5, 20

	type tally struct{ created, replays, conflicts int }
	results := make([]tally, keys)
	sem := make(chan struct{}, parallelKeys)
	var wg sync.WaitGroup
	for k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := req{"POST", "/payments", "acct_many", fmt.Sprintf("key-%04d", k), payment(int64(100+k), "USD")}
			var first string
			for _, resp := range e.concurrently(dups, r) {
				switch {
				case resp.status == http.StatusCreated && !resp.replayed():
					results[k].created++
					first = resp.body
				case resp.status == http.StatusCreated:
					results[k].replays++
				case resp.status == http.StatusConflict:
					results[k].conflicts++
				default:
					t.Errorf("key %d: unexpected %s", k, resp)
				}
			}
			if !strings.Contains(first, fmt.Sprintf(`"amount":%d,`, 100+k)) {
				t.Errorf("key %d: created body %q", k, first)
			}
		}()
	}
	wg.Wait()
	var created, replays, conflicts int
	for k, r := range results {
		if r.created != 1 {
			t.Errorf("key %d: %d executions, want 1", k, r.created)
		}
		created += r.created
		replays += r.replays
		conflicts += r.conflicts
	}
	t.Logf("%d requests: %d created, %d replays, %d in progress (409)", keys*dups, created, replays, conflicts)
	if created+replays+conflicts != keys*dups {
		t.Errorf("%d answers accounted for, want %d", created+replays+conflicts, keys*dups)
	}
	if c := e.count(`SELECT count(*) FROM payments`); c != keys {
		t.Errorf("%d payments rows, want %d", c, keys)
	}
	if c := e.count(`SELECT count(DISTINCT amount) FROM payments`); c != keys {
		t.Errorf("%d distinct amounts, want %d (each key's own payload)", c, keys)
	}
	rep := e.audit()
	if !rep.OK() || rep.Payments.CreatedKeys != keys || rep.Payments.Rows != keys {
		t.Errorf("audit:\n%s", rep)
	}
}

// The audit sees a row without a key, a key without a row and a key with two rows.
func TestAuditFindsOrphans(t *testing.T) {
	e := newEnv(t, service.Options{})
	ctx := context.Background()
	r := e.do(req{"POST", "/payments", "acct_x", "k-audit", payment(700, "EUR")})
	if r.status != http.StatusCreated {
		t.Fatal(r)
	}
	if rep := e.audit(); !rep.OK() {
		t.Fatalf("clean audit failed:\n%s", rep)
	}
	// A business row written outside the protocol (no key), and a second row for k-audit.
	for _, key := range []string{"k-sneaky", "k-audit"} {
		if _, err := e.pool.Exec(ctx, `INSERT INTO payments (account_id, amount, currency, idempotency_scope, idempotency_key)
			VALUES ('acct_x', 1, 'EUR', 'acct_x', $1)`, key); err != nil {
			t.Fatal(err)
		}
	}
	// A completed key whose row is gone.
	r = e.do(req{"POST", "/payments", "acct_x", "k-lost", payment(800, "EUR")})
	if r.status != http.StatusCreated {
		t.Fatal(r)
	}
	if _, err := e.pool.Exec(ctx, `DELETE FROM payments WHERE idempotency_key = 'k-lost'`); err != nil {
		t.Fatal(err)
	}
	rep := e.audit()
	t.Logf("audit:\n%s", rep)
	p := rep.Payments
	if rep.OK() || p.KeysWithoutRow != 1 || p.RowsWithoutKey != 1 || p.KeysWithSeveralRows != 1 || p.CreatedKeys != 2 || p.Rows != 3 {
		t.Errorf("audit counts %+v", p)
	}
	want := map[string]string{"key without a row": "k-lost", "row without a key": "k-sneaky", "key with several rows": "k-audit"}
	if len(rep.Samples) != len(want) {
		t.Errorf("samples %+v", rep.Samples)
	}
	for _, s := range rep.Samples {
		if want[s.Problem] != s.Key || s.Scope != "acct_x" || s.Operation != "createPayment" {
			t.Errorf("sample %+v", s)
		}
	}
}

// A row whose account is not its scope (which the service never writes) has no key, and
// its key no row: the audit reports both (it looks a key's rows up by account and scope,
// the columns the tables are distributed by on Citus).
func TestAuditRowOfAnotherAccount(t *testing.T) {
	e := newEnv(t, service.Options{})
	if r := e.do(req{"POST", "/payments", "acct_x", "k-moved", payment(700, "EUR")}); r.status != http.StatusCreated {
		t.Fatal(r)
	}
	if _, err := e.pool.Exec(context.Background(), `UPDATE payments SET account_id = 'acct_y' WHERE idempotency_key = 'k-moved'`); err != nil {
		t.Fatal(err)
	}
	rep := e.audit()
	if p := rep.Payments; rep.OK() || p.KeysWithoutRow != 1 || p.RowsWithoutKey != 1 || p.KeysWithSeveralRows != 0 {
		t.Errorf("audit:\n%s", rep)
	}
}

func TestRejections(t *testing.T) {
	e := newEnv(t, service.Options{MaxBodyBytes: 4096})
	body := payment(1500, "EUR")
	first := e.do(req{"POST", "/payments", "acct_a", "k-1", body})
	if first.status != http.StatusCreated {
		t.Fatal(first)
	}

	t.Run("payload mismatch", func(t *testing.T) {
		r := e.do(req{"POST", "/payments", "acct_a", "k-1", payment(1501, "EUR")})
		wantProblem(t, "same key, other amount", r, http.StatusUnprocessableEntity)
		// The same payload with other key order and spacing is the same request: a replay.
		r = e.do(req{"POST", "/payments", "acct_a", "k-1", `{ "currency": "EUR",  "amount": 1500 }`})
		if r.status != http.StatusCreated || !r.replayed() || r.body != first.body {
			t.Errorf("reordered payload: %s", r)
		}
	})
	t.Run("missing key", func(t *testing.T) {
		p := wantProblem(t, "no key", e.do(req{"POST", "/payments", "acct_a", "", body}), http.StatusBadRequest)
		if !strings.Contains(p.Detail, "Idempotency-Key") {
			t.Errorf("detail %q does not name the header", p.Detail)
		}
		wantProblem(t, "bad key", e.do(req{"POST", "/payments", "acct_a", "\"unterminated", body}), http.StatusBadRequest)
	})
	t.Run("missing account", func(t *testing.T) {
		wantProblem(t, "POST", e.do(req{"POST", "/payments", "", "k-2", body}), http.StatusUnauthorized)
		wantProblem(t, "GET", e.do(req{"GET", "/payments/x", "", "", ""}), http.StatusUnauthorized)
		wantProblem(t, "bad account", e.do(req{"POST", "/payments", "acct a", "k-2", body}), http.StatusUnauthorized)
	})
	t.Run("validation", func(t *testing.T) {
		for _, b := range []string{
			payment(0, "EUR"), payment(-5, "EUR"), payment(100_000_000_001, "EUR"),
			payment(100, "eur"), payment(100, "EURO"), payment(100, ""),
			`{"amount":100,"currency":"EUR","description":"` + strings.Repeat("x", 1001) + `"}`,
			`{"amount":1.5,"currency":"EUR"}`, `{"amount":100,`, `[]`,
			`{"currency":"EUR"}`, `{"amount":100,"currency":"EUR"}garbage`,
		} {
			wantProblem(t, b, e.do(req{"POST", "/payments", "acct_a", "k-invalid", b}), http.StatusBadRequest)
		}
		// Rejected before the protocol: the key was never claimed, a fixed body may use it.
		if c := e.count(`SELECT count(*) FROM idempotency_keys WHERE key = 'k-invalid'`); c != 0 {
			t.Errorf("an invalid request claimed its key")
		}
		if r := e.do(req{"POST", "/payments", "acct_a", "k-invalid", payment(100, "EUR")}); r.status != http.StatusCreated {
			t.Errorf("valid request after invalid ones: %s", r)
		}
	})
	t.Run("body too large", func(t *testing.T) {
		b := `{"amount":100,"currency":"EUR","description":"` + strings.Repeat("x", 5000) + `"}`
		wantProblem(t, "5 kB body", e.do(req{"POST", "/payments", "acct_a", "k-big", b}), http.StatusRequestEntityTooLarge)
	})
	t.Run("cross-account isolation", func(t *testing.T) {
		a := e.do(req{"POST", "/payments", "acct_a", "shared-key", payment(111, "EUR")})
		b := e.do(req{"POST", "/payments", "acct_b", "shared-key", payment(222, "GBP")})
		if a.status != http.StatusCreated || a.replayed() || b.status != http.StatusCreated || b.replayed() {
			t.Fatalf("same key, two accounts:\n%s\n%s", a, b)
		}
		pa, pb := decode[paymentJSON](t, a.body), decode[paymentJSON](t, b.body)
		if pa.ID == pb.ID {
			t.Fatal("one payment for two accounts")
		}
		// Each account replays its own; neither sees the other's payment.
		if r := e.do(req{"POST", "/payments", "acct_b", "shared-key", payment(222, "GBP")}); !r.replayed() || r.body != b.body {
			t.Errorf("acct_b retry: %s", r)
		}
		wantProblem(t, "acct_b reads acct_a's payment", e.do(req{"GET", "/payments/" + pa.ID, "acct_b", "", ""}), http.StatusNotFound)
		if r := e.do(req{"GET", "/payments/" + pb.ID, "acct_b", "", ""}); r.status != http.StatusOK {
			t.Errorf("acct_b reads its payment: %s", r)
		}
		if c := e.count(`SELECT count(*) FROM payments WHERE idempotency_key = 'shared-key'`); c != 2 {
			t.Errorf("%d payments for shared-key, want 2", c)
		}
	})
	wantProblem(t, "unknown payment", e.do(req{"GET", "/payments/pay_nope", "acct_a", "", ""}), http.StatusNotFound)
	if rep := e.audit(); !rep.OK() {
		t.Errorf("audit:\n%s", rep)
	}
}

func TestRefunds(t *testing.T) {
	e := newEnv(t, service.Options{})
	created := e.do(req{"POST", "/payments", "acct_r", "pay-1", `{"amount":1000,"currency":"EUR"}`})
	if created.status != http.StatusCreated {
		t.Fatal(created)
	}
	p := decode[paymentJSON](t, created.body)
	if p.Description != nil || !strings.Contains(created.body, `"description":null`) {
		t.Errorf("payment without description: %s", created.body)
	}
	refunds := "/payments/" + p.ID + "/refunds"
	refund := func(key string, amount int64) response {
		return e.do(req{"POST", refunds, "acct_r", key, fmt.Sprintf(`{"amount":%d}`, amount)})
	}
	status := func() string {
		r := e.do(req{"GET", "/payments/" + p.ID, "acct_r", "", ""})
		return decode[paymentJSON](t, r.body).Status
	}

	// A valid refund, then its retry: a replay, not a second refund.
	r1 := refund("refund-1", 600)
	if r1.status != http.StatusCreated || r1.replayed() {
		t.Fatalf("refund: %s", r1)
	}
	rj := decode[struct {
		ID        string `json:"id"`
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
	}](t, r1.body)
	if rj.PaymentID != p.ID || rj.Amount != 600 || rj.ID == "" {
		t.Errorf("refund body %s", r1.body)
	}
	if r := refund("refund-1", 600); r.status != http.StatusCreated || !r.replayed() || r.body != r1.body {
		t.Errorf("refund retry: %s", r)
	}
	if s := status(); s != "partially_refunded" {
		t.Errorf("status %q after a partial refund", s)
	}

	// The same key and body on another payment's refunds is another request (the path
	// parameter is in the fingerprint): 422, not a replay of the first payment's refund.
	other := decode[paymentJSON](t, e.do(req{"POST", "/payments", "acct_r", "pay-2", `{"amount":1000,"currency":"EUR"}`}).body)
	r := e.do(req{"POST", "/payments/" + other.ID + "/refunds", "acct_r", "refund-1", `{"amount":600}`})
	wantProblem(t, "refund-1 on another payment", r, http.StatusUnprocessableEntity)
	if c := e.count(`SELECT count(*) FROM refunds`); c != 1 {
		t.Errorf("%d refunds, want 1", c)
	}

	// 600 more exceeds the 400 left: a 422 business answer, committed with the key.
	over := refund("refund-2", 600)
	prob := wantProblem(t, "refund over the remaining amount", over, http.StatusUnprocessableEntity)
	if prob.Type != service.ProblemRefundExceedsRemaining || over.replayed() {
		t.Errorf("problem %+v", prob)
	}
	// Its retries replay it byte for byte, even after the refund would fit (refunding
	// under another key below does not change what refund-2 answered).
	for i, r := range append([]response{refund("refund-2", 600)}, e.concurrently(5, req{"POST", refunds, "acct_r", "refund-2", `{"amount":600}`})...) {
		if r.status != over.status || !r.replayed() || r.body != over.body || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("retry %d of the refused refund: %s", i, r)
		}
	}
	// Exactly what remains is fine, and then the payment is refunded.
	if r := refund("refund-3", 400); r.status != http.StatusCreated {
		t.Fatalf("refund of the rest: %s", r)
	}
	if s := status(); s != "refunded" {
		t.Errorf("status %q after refunding everything", s)
	}
	if r := refund("refund-2", 600); !r.replayed() || r.body != over.body {
		t.Errorf("refused refund, retried later: %s", r)
	}
	wantProblem(t, "refund of 1 more", refund("refund-4", 1), http.StatusUnprocessableEntity)

	// Unknown payment (or another account's): 404. Invalid amount: 400, before the protocol.
	wantProblem(t, "other account", e.do(req{"POST", refunds, "acct_other", "refund-5", `{"amount":1}`}), http.StatusNotFound)
	wantProblem(t, "amount 0", refund("refund-6", 0), http.StatusBadRequest)
	wantProblem(t, "no key", refund("", 1), http.StatusBadRequest)

	if c := e.count(`SELECT count(*) FROM refunds`); c != 2 {
		t.Errorf("%d refunds rows, want 2", c)
	}
	rep := e.audit()
	if !rep.OK() || rep.Refunds.CreatedKeys != 2 || rep.Refunds.Rows != 2 {
		t.Errorf("audit:\n%s", rep)
	}
}

// Concurrent refunds of one payment under different keys never refund more than the
// amount: the payment row lock serialises them.
func TestConcurrentRefunds(t *testing.T) {
	e := newEnv(t, service.Options{})
	created := e.do(req{"POST", "/payments", "acct_c", "pay-c", `{"amount":1000,"currency":"EUR"}`})
	p := decode[paymentJSON](t, created.body)
	const n = 10 // 10 refunds of 300: three fit
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	out := make([]response, n)
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			hr := e.prepare(req{"POST", "/payments/" + p.ID + "/refunds", "acct_c", fmt.Sprintf("r-%d", i), `{"amount":300}`})
			ready.Done()
			<-start
			out[i] = e.send(hr)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	var ok, refused int
	for _, r := range out {
		switch r.status {
		case http.StatusCreated:
			ok++
		case http.StatusUnprocessableEntity:
			refused++
		default:
			t.Errorf("unexpected %s", r)
		}
	}
	if ok != 3 || refused != 7 {
		t.Errorf("%d refunds, %d refused; want 3 and 7", ok, refused)
	}
	if c := e.count(`SELECT amount_refunded FROM payments WHERE id = $1`, p.ID); c != 900 {
		t.Errorf("refunded %d, want 900", c)
	}
	if rep := e.audit(); !rep.OK() {
		t.Errorf("audit:\n%s", rep)
	}
}
