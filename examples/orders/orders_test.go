package orders_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/examples/orders/api"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idemtest"
)

// TestMain starts one throwaway PostgreSQL for the package (or uses DATABASE_URL).
func TestMain(m *testing.M) { idemtest.Main(m) }

// TestCreateOrderConformance sends createOrder through the service's whole handler, as
// clients will: duplicates run the business once, a retry replays byte for byte, another
// body under the key is a 422, missing and invalid keys are 400s, a duplicate of a
// request in flight is a 409, and a business error releases the key.
func TestCreateOrderConformance(t *testing.T) {
	pool := idemtest.NewPool(t) // a database of the test's own, with idempotency_keys
	if err := migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	gate := idemtest.NewGate() // counts the business's runs; the checks hold or fail one
	h, err := newHandler(pool, gated{gate})
	if err != nil {
		t.Fatal(err)
	}
	idemtest.CheckOperation(t, idemtest.Operation{
		Handler:     h,
		Method:      "POST",
		Path:        "/orders",
		Header:      http.Header{"Content-Type": {"application/json"}, "X-Tenant-Id": {"acme"}},
		Body:        `{"sku":"book","qty":1}`,
		OtherBody:   `{"sku":"book","qty":2}`,
		KeyRequired: true,
		InvalidKeys: []string{strings.Repeat("k", 65)}, // the spec's maxLength is 64
		Gate:        gate,
	})
}

// gated is Orders with the test's gate at the start of its business, where the checks
// hold a run in flight or fail it.
type gated struct{ gate *idemtest.Gate }

func (g gated) CreateOrder(ctx context.Context, tx idem.Tx, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	if err := g.gate.Pass(ctx); err != nil {
		return nil, err
	}
	return Orders{}.CreateOrder(ctx, tx, req)
}
