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
	benchmarkValidate(b, "/payments", `{"amount":1999,"currency":"EUR","description":"Order #1042"}`)
}

// BenchmarkValidateRefund is the same for POST /payments/{id}/refunds, a templated path
// (a path parameter and a header).
func BenchmarkValidateRefund(b *testing.B) {
	benchmarkValidate(b, "/payments/pay_3b1f0c2a9d4e/refunds", `{"amount":500}`)
}

func benchmarkValidate(b *testing.B, path, body string) {
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
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, path, nil)
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
