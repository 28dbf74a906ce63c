package e2e

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/gen/testdata/golden/unionbody"
	"github.com/idemgen/idemgen/idem"
)

// Inline oneOf/anyOf request bodies (oapi-codegen issue 2498), and objects with
// additionalProperties: the business gets the decoded body, the fingerprint is its JSON (another payload under the same key is a
// 422, not a replay), and a body key inside the union is the key.

// unions records, in the receipt it answers with, the JSON of the body the business got
// (as the union's MarshalJSON writes it), and stores it in a business row.
type unions struct{ n atomic.Int32 }

func (u *unions) save(ctx context.Context, tx idem.Tx, body any) (unionbody.Receipt, error) {
	u.n.Add(1)
	seen, err := json.Marshal(body)
	if err != nil {
		return unionbody.Receipt{}, err
	}
	r := unionbody.Receipt{Summary: string(seen)}
	err = tx.QueryRow(ctx, `INSERT INTO runs (op) VALUES ($1) RETURNING id`, r.Summary).Scan(&r.Id)
	return r, err
}

func (u *unions) CreatePayment(ctx context.Context, tx idem.Tx, req unionbody.CreatePaymentRequestObject) (unionbody.CreatePaymentResponseObject, error) {
	r, err := u.save(ctx, tx, req.Body)
	return unionbody.CreatePayment201JSONResponse(r), err
}

func (u *unions) CreateShipment(ctx context.Context, tx idem.Tx, req unionbody.CreateShipmentRequestObject) (unionbody.CreateShipmentResponseObject, error) {
	r, err := u.save(ctx, tx, req.Body)
	return unionbody.CreateShipment201JSONResponse(r), err
}

func (u *unions) CreateRefund(ctx context.Context, tx idem.Tx, req unionbody.CreateRefundRequestObject) (unionbody.CreateRefundResponseObject, error) {
	r, err := u.save(ctx, tx, req.Body)
	return unionbody.CreateRefund201JSONResponse(r), err
}

func (u *unions) CreateTransfer(ctx context.Context, tx idem.Tx, req unionbody.CreateTransferRequestObject) (unionbody.CreateTransferResponseObject, error) {
	var body any = req.JSONBody
	if req.ApplicationVndAcmePlusJSONBody != nil {
		body = req.ApplicationVndAcmePlusJSONBody
	}
	r, err := u.save(ctx, tx, body)
	return unionbody.CreateTransfer201JSONResponse(r), err
}

func (u *unions) CreateCredit(ctx context.Context, tx idem.Tx, req unionbody.CreateCreditRequestObject) (unionbody.CreateCreditResponseObject, error) {
	r, err := u.save(ctx, tx, req.Body)
	return unionbody.CreateCredit201JSONResponse(r), err
}

func (u *unions) CreateLabel(ctx context.Context, tx idem.Tx, req unionbody.CreateLabelRequestObject) (unionbody.CreateLabelResponseObject, error) {
	r, err := u.save(ctx, tx, req.Body)
	return unionbody.CreateLabel201JSONResponse(r), err
}

func unionServer(t *testing.T) (*httptest.Server, *unions, *pgxpool.Pool) {
	t.Helper()
	pool := keyDB(t)
	impl := &unions{}
	store := idem.NewStore(pool)
	strict := unionbody.NewStrictHandlerWithOptions(unionbody.NewIdempotentStrictServer(impl, store), nil, unionbody.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: store.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	srv := httptest.NewServer(unionbody.HandlerWithOptions(strict, unionbody.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler}))
	t.Cleanup(srv.Close)
	return srv, impl, pool
}

// summary is the receipt's summary: the JSON of the body the business got.
func summary(t *testing.T, r result) string {
	t.Helper()
	var rc unionbody.Receipt
	if err := json.Unmarshal([]byte(r.body), &rc); err != nil {
		t.Fatalf("receipt %q: %v", r.body, err)
	}
	return rc.Summary
}

// Each union body, inline (oneOf, anyOf with a discriminator, in another JSON media type,
// in a components/requestBodies entry) or held in a component, and an inline object with
// additionalProperties, the key in the body (every
// member declares it) or, for the shipments and labels, in the added header: the business gets the
// JSON the client sent, a retry (its fields in another order) replays, the same key with another payload
// is a 422, and the business ran once.
func TestUnionBodies(t *testing.T) {
	for _, c := range []struct {
		name, path, contentType  string
		header                   map[string]string
		body, retry, other, seen string
	}{
		{
			name:  "inline oneOf, key in the body",
			path:  "/payments",
			body:  `{"idempotency_key": "pay-1", "card": "4000", "amount": 5}`,
			retry: `{"amount":5,"card":"4000","idempotency_key":"pay-1"}`,
			other: `{"idempotency_key": "pay-1", "card": "4000", "amount": 500}`,
			seen:  `{"amount":5,"card":"4000","idempotency_key":"pay-1"}`,
		},
		{
			name:   "inline anyOf, key in the header",
			path:   "/shipments",
			header: map[string]string{"Idempotency-Key": "ship-1"},
			body:   `{"kind": "Parcel", "weight": 3}`,
			retry:  `{"weight":3,"kind":"Parcel"}`,
			other:  `{"kind": "Parcel", "weight": 30}`,
			seen:   `{"kind":"Parcel","weight":3}`,
		},
		{
			name:        "inline oneOf in another JSON media type",
			path:        "/transfers",
			contentType: "application/vnd.acme+json",
			body:        `{"idempotency_key": "t-1", "iban": "DE00"}`,
			retry:       `{"iban":"DE00","idempotency_key":"t-1"}`,
			other:       `{"idempotency_key": "t-1", "iban": "DE99"}`,
			seen:        `{"iban":"DE00","idempotency_key":"t-1"}`,
		},
		{
			name:  "inline anyOf of a components/requestBodies entry",
			path:  "/credits",
			body:  `{"idempotency_key": "c-1", "card": "4000", "amount": 2}`,
			retry: `{"card":"4000","amount":2,"idempotency_key":"c-1"}`,
			other: `{"idempotency_key": "c-1", "card": "4000", "amount": 3}`,
			seen:  `{"amount":2,"card":"4000","idempotency_key":"c-1"}`,
		},
		{
			name:   "inline object with additionalProperties",
			path:   "/labels",
			header: map[string]string{"Idempotency-Key": "label-1"},
			body:   `{"name": "urgent", "color": "red"}`,
			retry:  `{"color":"red","name":"urgent"}`,
			other:  `{"name": "urgent", "color": "blue"}`,
			seen:   `{"color":"red","name":"urgent"}`,
		},
		{
			name:  "union component",
			path:  "/refunds",
			body:  `{"idempotency_key": "r-1", "iban": "DE00", "amount": 7}`,
			retry: `{"iban":"DE00","amount":7,"idempotency_key":"r-1"}`,
			other: `{"idempotency_key": "r-1", "iban": "DE01", "amount": 7}`,
			seen:  `{"amount":7,"iban":"DE00","idempotency_key":"r-1"}`,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.contentType == "" {
				c.contentType = "application/json"
			}
			srv, impl, pool := unionServer(t)
			first := send(t, srv, "POST", c.path, c.header, c.contentType, c.body)
			if first.status != 201 {
				t.Fatalf("first: %d %s", first.status, first.body)
			}
			if got := canonical(t, summary(t, first)); got != canonical(t, c.seen) {
				t.Errorf("the business got %s, want %s", got, c.seen)
			}
			retry := send(t, srv, "POST", c.path, c.header, c.contentType, c.retry)
			if retry.status != 201 || retry.header.Get(idem.ReplayedHeader) != "true" || retry.body != first.body {
				t.Errorf("retry: %d %v %s, want a replay of %s", retry.status, retry.header, retry.body, first.body)
			}
			if other := send(t, srv, "POST", c.path, c.header, c.contentType, c.other); other.status != 422 {
				t.Errorf("same key, another payload: %d %s, want 422", other.status, other.body)
			}
			if n := impl.n.Load(); n != 1 {
				t.Errorf("business ran %d times, want 1", n)
			}
			if n := count(t, pool, `SELECT count(*) FROM runs`); n != 1 {
				t.Errorf("%d business rows, want 1", n)
			}
		})
	}
}

// The body key of an inline union is read from the union: two payments under two body
// keys both run; a payment without the key (every member requires it) is a 400 before any
// SQL.
func TestInlineUnionBodyKey(t *testing.T) {
	srv, impl, pool := unionServer(t)
	for _, key := range []string{"pay-a", "pay-b"} {
		body := `{"idempotency_key": "` + key + `", "iban": "DE00", "amount": 1}`
		if r := send(t, srv, "POST", "/payments", nil, "application/json", body); r.status != 201 || r.header.Get(idem.ReplayedHeader) != "" {
			t.Errorf("%s: %d %v %s, want a first run", key, r.status, r.header, r.body)
		}
	}
	r := send(t, srv, "POST", "/payments", nil, "application/json", `{"iban": "DE00", "amount": 1}`)
	if r.status != 400 || !strings.Contains(r.body, "body /idempotency_key") {
		t.Errorf("no key: %d %s, want 400 naming the body key", r.status, r.body)
	}
	if n := impl.n.Load(); n != 2 {
		t.Errorf("business ran %d times, want 2", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 2 {
		t.Errorf("%d keys stored, want 2", n)
	}
}

// canonical re-encodes a JSON text with sorted keys.
func canonical(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
