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

// Both marked operations pass idemtest's conformance checks, behind the service's whole
// handler (account, validation, protocol): the gate is the service's Downstream hook,
// where a real service calls its payment provider.
func TestConformance(t *testing.T) {
	header := http.Header{"Content-Type": {"application/json"}, "X-Account-Id": {"acct_conformance"}}
	tooLong := strings.Repeat("k", 256) // the spec declares no maxLength: idem's 255 bytes
	newService := func(t *testing.T) (http.Handler, *idemtest.Gate) {
		pool := idemtest.PoolWithMax(t, idemtest.NewDB(t), 24)
		if err := service.Setup(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
		gate := idemtest.NewGate()
		return service.New(pool, service.Options{Downstream: gate.Pass, Logf: t.Logf}), gate
	}
	t.Run("createPayment", func(t *testing.T) {
		h, gate := newService(t)
		idemtest.CheckOperation(t, idemtest.Operation{
			Handler: h, Method: "POST", Path: "/payments", Header: header,
			Body: `{"amount":1999,"currency":"EUR"}`, OtherBody: `{"amount":2000,"currency":"EUR"}`,
			KeyRequired: true, InvalidKeys: []string{tooLong}, Gate: gate,
		})
	})
	t.Run("createRefund", func(t *testing.T) {
		h, gate := newService(t)
		id := createPayment(t, h, header, `{"amount":100000,"currency":"EUR"}`)
		idemtest.CheckOperation(t, idemtest.Operation{
			Handler: h, Method: "POST", Path: "/payments/" + id + "/refunds", Header: header,
			Body: `{"amount":1}`, OtherBody: `{"amount":2}`,
			KeyRequired: true, Gate: gate,
		})
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
