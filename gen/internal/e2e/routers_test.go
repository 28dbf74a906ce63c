package e2e

// The router cases: the golden packages chirouter, echorouter and ginrouter (idemgen's
// base with -router chi, echo, gin) and chiexternal, echoexternal and ginexternal
// (-base=external beside oapi-codegen's own output for each router), all from
// gen/testdata/golden/routers.yaml, served each through its router with the wiring
// README.md quotes (chi_test.go, echo_test.go, gin_test.go) and the same checks.

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

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemvalidate"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// orders is the business of routers.yaml, whatever package serves it: createOrder
// inserts a row through the protocol's transaction, and fails after it for item "fail".
type orders struct {
	calls atomic.Int32
}

func (o *orders) create(ctx context.Context, tx idem.Tx, account, item string, quantity int) (int64, error) {
	o.calls.Add(1)
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO orders (account, item, quantity) VALUES ($1, $2, $3) RETURNING id`, account, item, quantity).Scan(&id)
	if err == nil && item == "fail" {
		err = errors.New("business failure after a write")
	}
	return id, err
}

// get is the business of getOrder, an unmarked operation: order 500 fails.
func (o *orders) get(id int64) error {
	if id == 500 {
		return errors.New("unmarked failure: secret detail")
	}
	return nil
}

// accountKey holds the account authenticate found, in the request's context.
type accountKey struct{}

// authenticate is a service's own net/http middleware: it puts the caller's account (here
// the X-Account header) in the request's context, where the store's scope function reads
// it, so that one key from two accounts is two requests.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), accountKey{}, r.Header.Get("X-Account"))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func scope(ctx context.Context) (string, error) {
	if a, _ := ctx.Value(accountKey{}).(string); a != "" {
		return a, nil
	}
	return "", errors.New("no account in the request's context")
}

// routerCase is one package of routers.yaml behind its router.
type routerCase struct {
	name  string
	spec  func() (*openapi3.T, error) // the package's OpenAPI(), from its spec.gen.go
	serve func(store *idem.Store, o *orders, middleware ...func(http.Handler) http.Handler) http.Handler
}

// testRouters runs, for each case against its own database: one fresh request (201), its
// replay (201, byte-identical body, Idempotent-Replayed: true), the business run once and
// the key stored in the account's scope; a request the spec refuses (400 problem from
// idemvalidate, nothing claimed); a business failure (500 problem, written and released).
// Then, with a store that renders its rejections in the service's own shape, the requests
// the router itself cannot decode get that shape too (checkOwnErrorShape).
func testRouters(t *testing.T, cases ...routerCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := c.spec()
			if err != nil {
				t.Fatal(err)
			}
			pool := ordersDB(t)
			o := &orders{}
			store := idem.NewStore(pool, idem.WithScope(scope))
			validate, err := idemvalidate.Middleware(spec, store.RequestErrorHandler)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(c.serve(store, o, authenticate, validate))
			t.Cleanup(srv.Close)
			checkOrders(t, srv, o, pool)
			checkOwnErrorShape(t, c, pool)
		})
	}
}

// checkOwnErrorShape serves c with a store whose rejections are the service's own shape
// (ownShape: {"error": "..."} as application/json) and no validation in front, and sends
// what the router's server cannot decode: a body that is not JSON, a query parameter of
// the wrong type, no idempotency key. Each is a 400 in the store's shape (the wiring
// gives the server store.RequestErrorHandler), and none reaches the business.
func checkOwnErrorShape(t *testing.T, c routerCase, pool *pgxpool.Pool) {
	t.Helper()
	o := &orders{}
	store := idem.NewStore(pool, idem.WithScope(scope), idem.WithRejectionRenderer(ownShape))
	srv := httptest.NewServer(c.serve(store, o, authenticate))
	defer srv.Close()
	for _, r := range []struct{ what, query, key, body string }{
		{"a body that is not JSON", "", "k-10", `{"item": "book", "quantity": `},
		{"a query parameter of the wrong type", "?priority=maybe", "k-11", `{"item":"book","quantity":1}`},
		{"no idempotency key", "", "", `{"item":"book","quantity":1}`},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/accounts/acme/orders"+r.query, strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/json")
		if r.key != "" {
			req.Header.Set("Idempotency-Key", r.key)
		}
		req.Header.Set("X-Account", "acme")
		got := roundTrip(t, req)
		var e struct{ Error string }
		if got.status != 400 || got.header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(got.body), &e) != nil || e.Error == "" {
			t.Errorf("%s: %d %v %s, want 400 {\"error\": ...} as application/json, the store's shape", r.what, got.status, got.header, got.body)
		}
	}
	if n := o.calls.Load(); n != 0 {
		t.Errorf("business ran %d times for requests that cannot be decoded, want 0", n)
	}
}

func ordersDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id bigserial PRIMARY KEY, account text NOT NULL, item text NOT NULL, quantity int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

func placeOrder(t *testing.T, srv *httptest.Server, key, body string) result {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/accounts/acme/orders?priority=true", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Account", "acme")
	return roundTrip(t, req)
}

func checkOrders(t *testing.T, srv *httptest.Server, o *orders, pool *pgxpool.Pool) {
	first := placeOrder(t, srv, "k-1", `{"item":"book","quantity":2}`)
	if first.status != 201 || first.header.Get(idem.ReplayedHeader) != "" || !strings.Contains(first.body, `"account":"acme"`) {
		t.Fatalf("fresh: %d %v %s", first.status, first.header, first.body)
	}
	replay := placeOrder(t, srv, "k-1", `{ "quantity": 2, "item": "book" }`)
	if replay.status != 201 || replay.header.Get(idem.ReplayedHeader) != "true" || replay.body != first.body ||
		replay.header.Get("Content-Type") != first.header.Get("Content-Type") {
		t.Fatalf("replay: %d %v %q, want a replay of %d %q", replay.status, replay.header, replay.body, first.status, first.body)
	}
	if n := o.calls.Load(); n != 1 {
		t.Errorf("business ran %d times, want 1", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM orders`); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys WHERE scope = 'acme' AND key = 'k-1' AND status = 'completed'`); n != 1 {
		t.Errorf("%d completed keys k-1 in scope acme, want 1 (the scope function must see the request's context)", n)
	}

	refused := placeOrder(t, srv, "k-2", `{"item":"book","quantity":0}`)
	if refused.status != 400 || refused.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(refused.body, "quantity") {
		t.Errorf("a quantity under the spec's minimum: %d %v %s, want a 400 problem naming the field", refused.status, refused.header, refused.body)
	}
	// Members that differ from a declared property only by case: encoding/json would
	// decode them into the field openapi3filter validated under its exact name.
	for i, body := range []string{
		`{"item":"book","quantity":2,"QUANTITY":900000000000000}`,
		`{"item":"book","Quantity":0}`,
		`{"item":"book","quantity":2,"Item":""}`,
	} {
		r := placeOrder(t, srv, fmt.Sprintf("k-case-%d", i), body)
		if r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(r.body, "only by case") {
			t.Errorf("%s: %d %v %s, want a 400 problem naming the member that differs only by case", body, r.status, r.header, r.body)
		}
	}
	failed := placeOrder(t, srv, "k-3", `{"item":"fail","quantity":1}`)
	if failed.status != 500 || failed.header.Get("Content-Type") != "application/problem+json" || strings.Contains(failed.body, "business failure") ||
		!strings.Contains(failed.body, "it may be retried, with the same idempotency key") {
		t.Errorf("a business failure: %d %v %s, want a 500 problem that does not leak the error and says a retry runs", failed.status, failed.header, failed.body)
	}
	// An unmarked operation's failure: a 500 that promises nothing about keys.
	req, _ := http.NewRequest("GET", srv.URL+"/orders/500", nil)
	req.Header.Set("X-Account", "acme")
	if r := roundTrip(t, req); r.status != 500 || strings.Contains(r.body, "secret") || strings.Contains(r.body, "idempotency key") || strings.Contains(r.body, "rolled back") {
		t.Errorf("an unmarked operation's failure: %d %s, want a 500 problem that does not speak of keys or rollbacks", r.status, r.body)
	}
	if n := o.calls.Load(); n != 2 {
		t.Errorf("business ran %d times, want 2 (not for the refused request)", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 1 {
		t.Errorf("%d keys, want 1 (the refused request claims nothing, the failed one is released)", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM orders`); n != 1 {
		t.Errorf("%d orders, want 1 (the failure rolled back)", n)
	}
}
