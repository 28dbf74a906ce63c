package orders_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idemtest"
)

// TestMain starts one throwaway PostgreSQL for the package (or uses DATABASE_URL).
func TestMain(m *testing.M) { idemtest.Main(m) }

// TestCreateOrderConformance sends createOrder through the service's whole handler, as
// clients will: duplicates run the business once, a retry replays byte for byte, another
// body under the key is a 422, missing and invalid keys are 400s.
func TestCreateOrderConformance(t *testing.T) {
	pool := idemtest.NewPool(t) // a database of the test's own, with idempotency_keys
	if err := migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	h, err := newHandler(pool)
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
		Runs: func(tb testing.TB) int { // how many orders the business committed
			var n int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM orders`).Scan(&n); err != nil {
				tb.Fatal(err)
			}
			return n
		},
	})
}
