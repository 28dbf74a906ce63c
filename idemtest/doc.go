// Package idemtest is a test kit for services built with idemgen: a throwaway PostgreSQL
// for their tests, and conformance checks they run against their own http.Handler.
//
//	func TestMain(m *testing.M) { idemtest.Main(m) } // DATABASE_URL, or a throwaway cluster
//
//	func TestCreateOrderIsIdempotent(t *testing.T) {
//		pool := idemtest.NewPool(t) // a database of its own, with idempotency_keys
//		if err := db.Migrate(context.Background(), pool); err != nil { // the service's tables
//			t.Fatal(err)
//		}
//		gate := idemtest.NewGate() // the business calls gate.Pass (see Gate)
//		idemtest.CheckOperation(t, idemtest.Operation{
//			Handler:     newHandler(pool, gate), // the service's handler, as production wires it
//			Method:      "POST",
//			Path:        "/orders",
//			Header:      http.Header{"Content-Type": {"application/json"}},
//			Body:        `{"sku":"book","qty":1}`,
//			OtherBody:   `{"sku":"book","qty":2}`,
//			KeyRequired: true,
//			InvalidKeys: []string{strings.Repeat("k", 65)}, // the spec's maxLength is 64
//			Gate:        gate,
//		})
//	}
//
// The checks are HTTP-level: what a client sees (status, body bytes, the
// Idempotent-Replayed and Retry-After headers) and how often the business ran. They hold
// whatever the protocol does inside.
package idemtest
