package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idemtest"
)

// createPayment passes idemtest's conformance checks behind the service's whole handler
// (account, validation, protocol). The gate is the service's Downstream hook, called
// inside the business transaction where a real service calls its payment provider.
// (TestMain is idemtest.Main: a throwaway PostgreSQL for the package.)
func TestCreatePaymentConformance(t *testing.T) {
	// A database of the test's own, with idempotency_keys and the service's tables.
	pool := idemtest.PoolWithMax(t, idemtest.NewDB(t), 24)
	if err := service.Setup(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	gate := idemtest.NewGate()
	idemtest.CheckOperation(t, idemtest.Operation{
		Handler:     service.New(pool, service.Options{Downstream: gate.Pass}),
		Method:      "POST",
		Path:        "/payments",
		Header:      http.Header{"Content-Type": {"application/json"}, "X-Account-Id": {"acct_1"}},
		Body:        `{"amount":1999,"currency":"EUR"}`,
		OtherBody:   `{"amount":2000,"currency":"EUR"}`,
		KeyRequired: true,
		InvalidKeys: []string{strings.Repeat("k", 256)}, // the spec sets no maxLength: idem's 255 bytes
		Gate:        gate,
	})
}

// createRefund passes them too, on a payment with room for every refund they make.
func TestCreateRefundConformance(t *testing.T) {
	pool := idemtest.PoolWithMax(t, idemtest.NewDB(t), 24)
	if err := service.Setup(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	gate := idemtest.NewGate()
	h := service.New(pool, service.Options{Downstream: gate.Pass, Logf: t.Logf})
	header := http.Header{"Content-Type": {"application/json"}, "X-Account-Id": {"acct_1"}}
	id := createPayment(t, h, header, `{"amount":100000,"currency":"EUR"}`)
	idemtest.CheckOperation(t, idemtest.Operation{
		Handler: h, Method: "POST", Path: "/payments/" + id + "/refunds", Header: header,
		Body: `{"amount":1}`, OtherBody: `{"amount":2}`,
		KeyRequired: true, Gate: gate,
	})
}

// createPayment creates a payment through h and returns its id.
func createPayment(t *testing.T, h http.Handler, header http.Header, body string) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(body))
	req.Header = header.Clone()
	req.Header.Set("Idempotency-Key", "conformance-payment")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct{ Id string }
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &p) != nil || p.Id == "" {
		t.Fatalf("creating the payment to refund: %d %s", resp.StatusCode, b)
	}
	return p.Id
}
