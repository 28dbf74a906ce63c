package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/gen/testdata/golden/keyspec"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemvalidate"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// transfers implements keyspec's IdempotentServerInterface. createTransfer blocks until
// release is closed when hold is set, so a duplicate can arrive while it runs.
type transfers struct {
	calls   atomic.Int32
	hold    atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (s *transfers) run(ctx context.Context, tx idem.Tx, amount int) (keyspec.Transfer, error) {
	s.calls.Add(1)
	var id string
	if err := tx.QueryRow(ctx, `INSERT INTO transfers (amount) VALUES ($1) RETURNING id::text`, amount).Scan(&id); err != nil {
		return keyspec.Transfer{}, err
	}
	return keyspec.Transfer{Id: &id, Amount: amount}, nil
}

func (s *transfers) CreateTransfer(ctx context.Context, tx idem.Tx, req keyspec.CreateTransferRequestObject) (keyspec.CreateTransferResponseObject, error) {
	if s.hold.Load() {
		s.started <- struct{}{}
		<-s.release
	}
	t, err := s.run(ctx, tx, req.Body.Amount)
	return keyspec.CreateTransfer201JSONResponse(t), err
}

func (s *transfers) CreatePayout(ctx context.Context, tx idem.Tx, req keyspec.CreatePayoutRequestObject) (keyspec.CreatePayoutResponseObject, error) {
	t, err := s.run(ctx, tx, req.Body.Amount)
	return keyspec.CreatePayout201JSONResponse(t), err
}

func (s *transfers) CreateCharge(ctx context.Context, tx idem.Tx, req keyspec.CreateChargeRequestObject) (keyspec.CreateChargeResponseObject, error) {
	t, err := s.run(ctx, tx, req.Body.Amount)
	return keyspec.CreateCharge201JSONResponse(t), err
}

// ownShape renders the protocol's rejections in the spec's own error schema,
// {"error": "..."} as application/json.
func ownShape(p idem.Problem) (string, []byte) {
	b, _ := json.Marshal(keyspec.Error{Error: p.Detail})
	return "application/json", b
}

// keyspecServer serves keyspec's generated handlers with a store that renders rejections
// in the spec's own shape (ownShape), and the store's RequestErrorHandler as the server's
// error handler for requests, wrapped in the middleware each of wrap returns for the store.
func keyspecServer(t *testing.T, wrap ...func(store *idem.Store) func(http.Handler) http.Handler) (*httptest.Server, *transfers, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE transfers (id bigserial PRIMARY KEY, amount int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	impl := &transfers{started: make(chan struct{}), release: make(chan struct{})}
	store := idem.NewStore(pool, idem.WithRejectionRenderer(ownShape))
	strict := keyspec.NewStrictHandlerWithOptions(keyspec.NewIdempotentStrictServer(impl, store), nil, keyspec.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: store.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	h := keyspec.HandlerWithOptions(strict, keyspec.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler})
	for _, w := range wrap {
		h = w(store)(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, impl, pool
}

const uuidKey = "0b6f3a39-8c7e-4f7a-9d55-6a1f2d9e4c11"

// The spec declares x-idempotency-key (required, format uuid) and the marker is true: that
// header is the key. A client sending only it is protected; one sending Idempotency-Key
// instead is refused, as the spec requires the declared one.
func TestDeclaredUUIDHeaderIsTheKey(t *testing.T) {
	srv, impl, pool := keyspecServer(t)
	h := map[string]string{"x-idempotency-key": uuidKey}
	first := send(t, srv, "POST", "/transfers", h, "application/json", `{"amount": 5}`)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	again := send(t, srv, "POST", "/transfers", h, "application/json", `{ "amount":5 }`)
	if again.status != 201 || again.header.Get(idem.ReplayedHeader) != "true" || again.body != first.body {
		t.Fatalf("retry with the declared header: %d %v %s, want a replay of %s", again.status, again.header, again.body, first.body)
	}
	other := send(t, srv, "POST", "/transfers", map[string]string{"Idempotency-Key": uuidKey}, "application/json", `{"amount": 5}`)
	if other.status != 400 {
		t.Errorf("only Idempotency-Key, which the spec does not declare: %d %s, want 400 (x-idempotency-key is required)", other.status, other.body)
	}
	if n := impl.calls.Load(); n != 1 {
		t.Errorf("business ran %d times, want 1", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM transfers`); n != 1 {
		t.Errorf("%d transfers, want 1", n)
	}
}

// The declared key schema is enforced before any SQL, each violation a 400 naming the rule.
func TestDeclaredKeyConstraints(t *testing.T) {
	srv, impl, pool := keyspecServer(t)
	for _, c := range []struct {
		name, path string
		header     map[string]string
		body, rule string
	}{
		{"not a uuid", "/transfers", map[string]string{"x-idempotency-key": "not-a-uuid"}, `{"amount": 1}`, "format uuid"},
		{"over maxLength", "/payouts", map[string]string{"Idempotency-Key": strings.Repeat("k", 65)}, `{"amount": 1}`, "maxLength of 64"},
		{"under minLength", "/payouts", map[string]string{"Idempotency-Key": "short"}, `{"amount": 1}`, "minLength of 8"},
		{"breaks the pattern", "/payouts", map[string]string{"Idempotency-Key": "has spaces in it"}, `{"amount": 1}`, "pattern"},
		{"body key over maxLength", "/charges", nil, `{"amount": 1, "idempotency_key": "` + strings.Repeat("k", 46) + `"}`, "maxLength of 45"},
		{"body key missing", "/charges", nil, `{"amount": 1}`, "empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := send(t, srv, "POST", c.path, c.header, "application/json", c.body)
			if r.status != 400 || !strings.Contains(r.body, c.rule) {
				t.Errorf("%d %s, want 400 naming %q", r.status, r.body, c.rule)
			}
		})
	}
	if n := impl.calls.Load(); n != 0 {
		t.Errorf("business ran %d times, want 0", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Errorf("%d keys stored, want 0", n)
	}
}

// A header named in fingerprint-headers is part of the request the key identifies: the
// same key with X-Dry-Run changed is a 422, not a replay of the dry run.
func TestFingerprintHeader(t *testing.T) {
	srv, impl, _ := keyspecServer(t)
	key := "payout-key-0001"
	dry := send(t, srv, "POST", "/payouts", map[string]string{"Idempotency-Key": key, "X-Dry-Run": "true"}, "application/json", `{"amount": 3}`)
	if dry.status != 201 {
		t.Fatalf("dry run: %d %s", dry.status, dry.body)
	}
	live := send(t, srv, "POST", "/payouts", map[string]string{"Idempotency-Key": key, "X-Dry-Run": "false"}, "application/json", `{"amount": 3}`)
	if live.status != 422 {
		t.Errorf("same key, X-Dry-Run changed: %d %v %s, want 422", live.status, live.header, live.body)
	}
	if n := impl.calls.Load(); n != 1 {
		t.Errorf("business ran %d times, want 1", n)
	}
}

// The spec declares its own error shape for 409 and 422; with WithRejectionRenderer the
// protocol answers in it: a duplicate arriving while the first request runs gets 409
// {"error": "..."} as application/json, with Retry-After.
func TestRejectionsInTheSpecsOwnShape(t *testing.T) {
	srv, impl, _ := keyspecServer(t)
	impl.hold.Store(true)
	h := map[string]string{"x-idempotency-key": uuidKey}
	done := make(chan result)
	go func() { done <- send(t, srv, "POST", "/transfers", h, "application/json", `{"amount": 7}`) }()
	<-impl.started // the first request holds the claim
	dup := send(t, srv, "POST", "/transfers", h, "application/json", `{"amount": 7}`)
	close(impl.release)
	if first := <-done; first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	var e keyspec.Error
	if dup.status != 409 || dup.header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(dup.body), &e) != nil || e.Error == "" || dup.header.Get("Retry-After") == "" {
		t.Errorf("duplicate in flight: %d %v %s, want 409 {\"error\": ...} as application/json with Retry-After", dup.status, dup.header, dup.body)
	}
	mismatch := send(t, srv, "POST", "/transfers", h, "application/json", `{"amount": 8}`)
	if mismatch.status != 422 || mismatch.header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(mismatch.body), &e) != nil {
		t.Errorf("other payload: %d %v %s, want 422 in the spec's shape", mismatch.status, mismatch.header, mismatch.body)
	}
}

// send makes one request with the given headers and body.
func send(t *testing.T, srv *httptest.Server, method, path string, header map[string]string, contentType, body string) result {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return roundTrip(t, req)
}

// Requests the server cannot decode (a body that is not JSON, a header of the wrong type)
// are answered by the store's RequestErrorHandler in the spec's own shape, like the
// protocol's rejections: one error shape for the client, and nothing claimed.
func TestUndecodableRequestsInTheSpecsOwnShape(t *testing.T) {
	srv, impl, pool := keyspecServer(t)
	for _, c := range []struct {
		path   string
		header map[string]string
		body   string
	}{
		{"/transfers", map[string]string{"x-idempotency-key": uuidKey}, `{"amount": `},
		{"/payouts", map[string]string{"Idempotency-Key": "payout-0001", "X-Dry-Run": "maybe"}, `{"amount": 5}`},
	} {
		r := send(t, srv, "POST", c.path, c.header, "application/json", c.body)
		var e keyspec.Error
		if r.status != 400 || r.header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(r.body), &e) != nil || e.Error == "" {
			t.Errorf("%s %v %s: %d %v %s, want 400 {\"error\": ...} as application/json", c.path, c.header, c.body, r.status, r.header, r.body)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 || impl.calls.Load() != 0 {
		t.Fatalf("%d keys stored, business ran %d times: undecodable requests must not reach the protocol", n, impl.calls.Load())
	}
}

// Requests are validated against the spec before the protocol (idemvalidate, with the
// store's RequestErrorHandler): a body that breaks the schema, or carries data after its
// JSON value, is a 400 in the spec's own shape that claims nothing, and the same key then
// serves the corrected request.
func TestValidationBeforeTheClaim(t *testing.T) {
	spec, err := keyspec.OpenAPI() // the generated package's own spec
	if err != nil {
		t.Fatal(err)
	}
	srv, impl, pool := keyspecServer(t, func(store *idem.Store) func(http.Handler) http.Handler {
		validate, err := idemvalidate.Middleware(spec, store.RequestErrorHandler)
		if err != nil {
			t.Fatal(err)
		}
		return validate
	})
	h := map[string]string{"x-idempotency-key": uuidKey}
	for _, c := range []struct{ body, names string }{
		{`{}`, `amount`},
		{`{"amount": 0}`, `/amount: number must be at least 1`},
		{`{"amount": "5"}`, `/amount`},
		{`{"amount": 5}garbage`, `after top-level value`},
		// encoding/json would decode these into Amount, unvalidated.
		{`{"amount": 5, "AMOUNT": 900000000000000}`, `/AMOUNT: member "AMOUNT" differs from the declared property "amount" only by case`},
		{`{"Amount": 0}`, `/Amount: member "Amount"`},
	} {
		r := send(t, srv, "POST", "/transfers", h, "application/json", c.body)
		var e keyspec.Error
		if r.status != 400 || r.header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(r.body), &e) != nil || !strings.Contains(e.Error, c.names) {
			t.Errorf("%s: %d %s, want 400 {\"error\": ...} naming %q", c.body, r.status, r.body, c.names)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 || impl.calls.Load() != 0 {
		t.Fatalf("%d keys stored, business ran %d times: invalid requests must not reach the protocol", n, impl.calls.Load())
	}
	if r := send(t, srv, "POST", "/transfers", h, "application/json", `{"amount": 5}`); r.status != 201 {
		t.Errorf("the corrected request with the same key: %d %s", r.status, r.body)
	}
}

// The key header is format uuid: one uuid in any case is one idempotency key (its
// canonical, lowercase form, the one oapi-codegen's uuid type yields under
// -base=external), so a retry that spells it in another case replays.
func TestUUIDKeyAnyCase(t *testing.T) {
	srv, impl, pool := keyspecServer(t)
	upper := strings.ToUpper(uuidKey)
	first := send(t, srv, "POST", "/transfers", map[string]string{"x-idempotency-key": upper}, "application/json", `{"amount": 5}`)
	if first.status != 201 {
		t.Fatalf("first, uppercase key: %d %s", first.status, first.body)
	}
	again := send(t, srv, "POST", "/transfers", map[string]string{"x-idempotency-key": uuidKey}, "application/json", `{"amount": 5}`)
	if again.status != 201 || again.header.Get(idem.ReplayedHeader) != "true" || again.body != first.body {
		t.Errorf("retry, lowercase key: %d %v %s, want a replay of %s", again.status, again.header, again.body, first.body)
	}
	if n := impl.calls.Load(); n != 1 {
		t.Errorf("business ran %d times, want 1", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys WHERE key = '`+uuidKey+`'`); n != 1 {
		t.Errorf("%d keys stored as %s, want 1 (the canonical form)", n, uuidKey)
	}
}
