package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/gen/testdata/golden/bodykeys"
	"github.com/idemgen/idemgen/gen/testdata/golden/caseheader"
	conventionapi "github.com/idemgen/idemgen/gen/testdata/golden/convention"
	"github.com/idemgen/idemgen/gen/testdata/golden/ecmapattern"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemvalidate"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// Issue 17 at run time: the key a spec declares in a JSON or form body is the key, and
// ECMA-262 key patterns are enforced before any SQL.

// keyDB is a database with the protocol's table and a table of business rows, one per
// business run that committed.
func keyDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE runs (id bigserial PRIMARY KEY, op text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

// runs counts business runs, and records each in the runs table through tx.
type runs struct{ n atomic.Int32 }

func (r *runs) run(ctx context.Context, tx idem.Tx, op string) error {
	r.n.Add(1)
	_, err := tx.Exec(ctx, `INSERT INTO runs (op) VALUES ($1)`, op)
	return err
}

type bodyKeys struct{ runs }

func (s *bodyKeys) CreateTransfer(ctx context.Context, tx idem.Tx, _ bodykeys.CreateTransferRequestObject) (bodykeys.CreateTransferResponseObject, error) {
	return bodykeys.CreateTransfer201Response{}, s.run(ctx, tx, "transfer")
}

func (s *bodyKeys) CreateCall(ctx context.Context, tx idem.Tx, _ bodykeys.CreateCallRequestObject) (bodykeys.CreateCallResponseObject, error) {
	return bodykeys.CreateCall201Response{}, s.run(ctx, tx, "call")
}

func (s *bodyKeys) SendMessage(ctx context.Context, tx idem.Tx, _ bodykeys.SendMessageRequestObject) (bodykeys.SendMessageResponseObject, error) {
	return bodykeys.SendMessage202Response{}, s.run(ctx, tx, "message")
}

func (s *bodyKeys) CreateRefund(ctx context.Context, tx idem.Tx, _ bodykeys.CreateRefundRequestObject) (bodykeys.CreateRefundResponseObject, error) {
	return bodykeys.CreateRefund201Response{}, s.run(ctx, tx, "refund")
}

func (s *bodyKeys) CreatePayout(ctx context.Context, tx idem.Tx, _ bodykeys.CreatePayoutRequestObject) (bodykeys.CreatePayoutResponseObject, error) {
	return bodykeys.CreatePayout201Response{}, s.run(ctx, tx, "payout")
}

func bodyKeysServer(t *testing.T) (*httptest.Server, *bodyKeys, *pgxpool.Pool) {
	t.Helper()
	pool := keyDB(t)
	impl := &bodyKeys{}
	store := idem.NewStore(pool)
	strict := bodykeys.NewStrictHandlerWithOptions(bodykeys.NewIdempotentStrictServer(impl, store), nil, bodykeys.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: store.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	srv := httptest.NewServer(bodykeys.HandlerWithOptions(strict, bodykeys.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler}))
	t.Cleanup(srv.Close)
	return srv, impl, pool
}

const formType = "application/x-www-form-urlencoded"

// With x-idempotent: true, the key is where the spec declares it: a required JSON body
// property, an optional form field, either body of an operation that takes both. A
// client that follows the spec (no Idempotency-Key header) is protected: its retry
// replays, with a key field re-ordered or re-encoded, and the business ran once.
func TestBodyKeysAreTheKey(t *testing.T) {
	for _, c := range []struct {
		name, path, contentType, body, retry string
	}{
		{"JSON body property", "/transfers", "application/json", `{"idempotency_key": "transfer-1", "amount": 5}`, `{"amount":5,"idempotency_key":"transfer-1"}`},
		{"form field", "/calls", formType, `To=%2B15550100&IdempotencyKey=call-1`, `IdempotencyKey=call-1&To=%2B15550100`},
		{"JSON of two bodies", "/messages", "application/json", `{"idempotencyKey": "` + uuidKey + `", "text": "hi"}`, `{"text":"hi","idempotencyKey":"` + uuidKey + `"}`},
		{"form of two bodies", "/messages", formType, `idempotencyKey=` + uuidKey + `&text=hi`, `text=hi&idempotencyKey=` + uuidKey},
		{"property of every union member", "/payouts", "application/json", `{"idempotency_key": "payout-1", "iban": "DE00"}`, `{"iban":"DE00","idempotency_key":"payout-1"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, impl, pool := bodyKeysServer(t)
			first := send(t, srv, "POST", c.path, nil, c.contentType, c.body)
			if first.status/100 != 2 || first.header.Get(idem.ReplayedHeader) != "" {
				t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
			}
			again := send(t, srv, "POST", c.path, nil, c.contentType, c.retry)
			if again.status != first.status || again.header.Get(idem.ReplayedHeader) != "true" {
				t.Errorf("retry with the body's key: %d %v %s, want a replay", again.status, again.header, again.body)
			}
			if n := impl.n.Load(); n != 1 {
				t.Errorf("business ran %d times, want 1", n)
			}
			if n := count(t, pool, `SELECT count(*) FROM runs`); n != 1 {
				t.Errorf("%d business rows, want 1", n)
			}
			if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 1 {
				t.Errorf("%d keys stored, want 1", n)
			}
		})
	}
}

// A body key required by the spec is required (in a union body: by every member): a
// request without it is a 400 before any SQL, and nothing runs; a key the body declares
// with maxLength is held to it.
func TestBodyKeyRequired(t *testing.T) {
	srv, impl, pool := bodyKeysServer(t)
	for _, c := range []struct{ path, body, rule string }{
		{"/transfers", `{"amount": 5}`, "invalid idempotency key: empty"},
		{"/transfers", `{"amount": 5, "idempotency_key": "` + strings.Repeat("k", 65) + `"}`, "maxLength of 64"},
		{"/payouts", `{"card": "4000"}`, "requires an idempotency key (body /idempotency_key)"},
	} {
		r := send(t, srv, "POST", c.path, nil, "application/json", c.body)
		if r.status != 400 || !strings.Contains(r.body, c.rule) {
			t.Errorf("%s: %d %s, want 400 naming %q", c.body, r.status, r.body, c.rule)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 || impl.n.Load() != 0 {
		t.Errorf("%d keys stored, business ran %d times: want none", n, impl.n.Load())
	}
}

type ecmaPatterns struct{ runs }

func (s *ecmaPatterns) CreatePayment(ctx context.Context, tx idem.Tx, req ecmapattern.CreatePaymentRequestObject) (ecmapattern.CreatePaymentResponseObject, error) {
	return ecmapattern.CreatePayment201JSONResponse(*req.Body), s.run(ctx, tx, "payment")
}

func (s *ecmaPatterns) CreateRefund(ctx context.Context, tx idem.Tx, _ ecmapattern.CreateRefundRequestObject) (ecmapattern.CreateRefundResponseObject, error) {
	return ecmapattern.CreateRefund201Response{}, s.run(ctx, tx, "refund")
}

// ECMA-262 patterns, lookahead included, are enforced: on the key by the protocol (400
// naming the pattern, before any SQL, with no validation in front of it), and by
// idemvalidate with the same engine on the key and the body; the spec generates although
// Go's regexp cannot compile its patterns.
func TestECMAPatternsEnforced(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromFile("../../testdata/golden/ecmapattern/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, validated := range []bool{false, true} {
		name := "protocol"
		if validated {
			name = "idemvalidate"
		}
		t.Run(name, func(t *testing.T) {
			pool := keyDB(t)
			impl := &ecmaPatterns{}
			store := idem.NewStore(pool)
			strict := ecmapattern.NewStrictHandlerWithOptions(ecmapattern.NewIdempotentStrictServer(impl, store), nil, ecmapattern.StrictHTTPServerOptions{
				RequestErrorHandlerFunc: store.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
			})
			h := ecmapattern.HandlerWithOptions(strict, ecmapattern.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler})
			if validated {
				validate, err := idemvalidate.Middleware(spec, store.RequestErrorHandler)
				if err != nil {
					t.Fatal(err)
				}
				h = validate(h)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)

			refused := []struct{ path, key, body, names string }{
				{"/refunds", "test-0001", "", `does not match the pattern \"^(?!test-)`},
			}
			if validated {
				refused = []struct{ path, key, body, names string }{
					{"/refunds", "test-0001", "", `header parameter \"Idempotency-Key\": string doesn't match the regular expression`},
					{"/payments", "pay-0001", `{"amount": 5, "reference": "1abc"}`, "request body: /reference"},
				}
			}
			for _, c := range refused {
				r := send(t, srv, "POST", c.path, keyHeaders(c.key), contentType(c.body), c.body)
				if r.status != http.StatusBadRequest || !strings.Contains(r.body, c.names) {
					t.Errorf("%s with key %q: %d %s, want 400 naming %s", c.path, c.key, r.status, r.body, c.names)
				}
			}
			if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 || impl.n.Load() != 0 {
				t.Fatalf("%d keys stored, business ran %d times: a key or body that breaks its pattern claims nothing", n, impl.n.Load())
			}
			for _, c := range []struct{ path, key, body string }{
				{"/refunds", "live-0001", ""},
				{"/payments", "pay-0001", `{"amount": 5, "reference": "abc1"}`},
			} {
				first := send(t, srv, "POST", c.path, keyHeaders(c.key), contentType(c.body), c.body)
				again := send(t, srv, "POST", c.path, keyHeaders(c.key), contentType(c.body), c.body)
				if first.status != 201 || again.status != 201 || again.header.Get(idem.ReplayedHeader) != "true" {
					t.Errorf("%s with key %q: %d %s, then %d %v, want 201 and its replay", c.path, c.key, first.status, first.body, again.status, again.header)
				}
			}
			if n := impl.n.Load(); n != 2 {
				t.Errorf("business ran %d times, want 2", n)
			}
		})
	}
}

// keyHeaders sends key in both of ecmapattern's key headers (one per operation).
func keyHeaders(key string) map[string]string {
	return map[string]string{"Idempotency-Key": key, "X-Idempotency-Key": key}
}

func contentType(body string) string {
	if body == "" {
		return ""
	}
	return "application/json"
}

type caseHeader struct{ runs }

func (s *caseHeader) CreateOrder(ctx context.Context, tx idem.Tx, _ caseheader.CreateOrderRequestObject) (caseheader.CreateOrderResponseObject, error) {
	return caseheader.CreateOrder201Response{}, s.run(ctx, tx, "order")
}

// One key header declared twice in different cases is one header with the stricter of
// each rule: required (the inline declaration's) and minLength 8 (the shared one's); a
// key that meets both is the key, in either spelling of the header.
func TestCaseDuplicateHeaderStricterWins(t *testing.T) {
	pool := keyDB(t)
	impl := &caseHeader{}
	store := idem.NewStore(pool)
	strict := caseheader.NewStrictHandlerWithOptions(caseheader.NewIdempotentStrictServer(impl, store), nil, caseheader.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: store.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	srv := httptest.NewServer(caseheader.HandlerWithOptions(strict, caseheader.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		header map[string]string
		rule   string
	}{
		{nil, "requires an idempotency key (header Idempotency-Key)"},
		{map[string]string{"idempotency-key": "short"}, "minLength of 8"},
		{map[string]string{"Idempotency-Key": strings.Repeat("k", 65)}, "maxLength of 64"},
	} {
		if r := send(t, srv, "POST", "/orders", c.header, "", ""); r.status != 400 || !strings.Contains(r.body, c.rule) {
			t.Errorf("%v: %d %s, want 400 naming %q", c.header, r.status, r.body, c.rule)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 || impl.n.Load() != 0 {
		t.Fatalf("%d keys stored, business ran %d times: want none", n, impl.n.Load())
	}
	first := send(t, srv, "POST", "/orders", map[string]string{"Idempotency-Key": "order-0001"}, "", "")
	again := send(t, srv, "POST", "/orders", map[string]string{"idempotency-key": "order-0001"}, "", "")
	if first.status != 201 || again.status != 201 || again.header.Get(idem.ReplayedHeader) != "true" || impl.n.Load() != 1 {
		t.Errorf("%d, then %d %v, business ran %d times: want 201, its replay, and one run", first.status, again.status, again.header, impl.n.Load())
	}
}

type convention struct{ runs }

func (s *convention) CreateOrder(ctx context.Context, tx idem.Tx, _ conventionapi.CreateOrderRequestObject) (conventionapi.CreateOrderResponseObject, error) {
	return conventionapi.CreateOrder201Response{}, s.run(ctx, tx, "order")
}

func (s *convention) CreateInvoice(context.Context, conventionapi.CreateInvoiceRequestObject) (conventionapi.CreateInvoiceResponseObject, error) {
	return conventionapi.CreateInvoice201Response{}, nil
}

func (s *convention) CreateRefund(ctx context.Context, tx idem.Tx, _ conventionapi.CreateRefundRequestObject) (conventionapi.CreateRefundResponseObject, error) {
	return conventionapi.CreateRefund201Response{}, s.run(ctx, tx, "refund")
}

// An operation that declares no key listens on the header the spec's other operations
// declare (X-Idempotency-Key), not on Idempotency-Key: a client that follows the spec's
// convention is protected.
func TestAddedHeaderFollowsTheConvention(t *testing.T) {
	pool := keyDB(t)
	impl := &convention{}
	store := idem.NewStore(pool)
	strict := conventionapi.NewStrictHandlerWithOptions(conventionapi.NewIdempotentStrictServer(impl, store), nil, conventionapi.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: store.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	srv := httptest.NewServer(conventionapi.HandlerWithOptions(strict, conventionapi.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler}))
	t.Cleanup(srv.Close)
	h := map[string]string{"X-Idempotency-Key": "refund-0001"}
	first := send(t, srv, "POST", "/refunds", h, "", "")
	again := send(t, srv, "POST", "/refunds", h, "", "")
	if first.status != 201 || again.status != 201 || again.header.Get(idem.ReplayedHeader) != "true" {
		t.Errorf("%d, then %d %v: want 201 and its replay", first.status, again.status, again.header)
	}
	if n := impl.n.Load(); n != 1 {
		t.Errorf("business ran %d times, want 1", n)
	}
}
