package idemvalidate

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// BenchmarkValidate is the middleware's cost for the payments example's POST /payments
// (its spec, a valid body, an Idempotency-Key): routing, the body's reads and checks
// and openapi3filter's validation, per request.
func BenchmarkValidate(b *testing.B) {
	spec, err := openapi3.NewLoader().LoadFromFile("../../examples/payments/openapi.yaml")
	if err != nil {
		b.Fatal(err)
	}
	failed := 0
	validate, err := Middleware(spec, func(w http.ResponseWriter, r *http.Request, err error) { failed++ })
	if err != nil {
		b.Fatal(err)
	}
	h := validate(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	const body = `{"amount":1999,"currency":"EUR","description":"Order #1042"}`
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/payments", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k-0123456789")
	rb := &resetBody{}
	b.ReportAllocs()
	for b.Loop() {
		rb.Reset(body) // the request's own body, without allocations of the benchmark's
		r.Body, r.ContentLength = rb, int64(len(body))
		h.ServeHTTP(w, r)
	}
	if failed != 0 {
		b.Fatalf("%d requests refused", failed)
	}
}

type resetBody struct{ strings.Reader }

func (*resetBody) Close() error { return nil }

var _ io.ReadCloser = (*resetBody)(nil)
