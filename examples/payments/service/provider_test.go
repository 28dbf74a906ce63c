package service_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/examples/payments/provider"
	providerapi "github.com/idemgen/idemgen/examples/payments/provider/api"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/idemtest"
)

// The payment charges the provider (the stand-in, on a database of its own) under a key
// derived from its own: the first run of a payment charges, then fails after the charge
// (its transaction rolled back, its key released); the retry with the payment's key runs
// the business again, and the provider, given the same derived key, replays its charge
// instead of charging twice. Another payment is another charge.
func TestPaymentChargesOnceAcrossRetries(t *testing.T) {
	ctx := context.Background()
	ppool := idemtest.PoolWithMax(t, idemtest.NewDB(t), 8)
	if err := provider.Setup(ctx, ppool); err != nil {
		t.Fatal(err)
	}
	psrv := httptest.NewServer(provider.New(ppool, t.Logf))
	t.Cleanup(psrv.Close)
	pc, err := providerapi.NewIdempotentClient(psrv.URL, &idemclient.Client{MaxAttempts: 3, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	e := newEnv(t, service.Options{Provider: pc, Downstream: func(context.Context) error {
		if runs.Add(1) == 1 {
			return errors.New("the process died after the charge, before its COMMIT")
		}
		return nil
	}})
	body := `{"amount":1999,"currency":"EUR"}`
	if r := e.do(req{method: "POST", path: "/payments", account: "acct_1", key: "pay-1", body: body}); r.status != http.StatusInternalServerError {
		t.Fatalf("the first run: %s, want 500 (rolled back after the charge)", r)
	}
	if r := e.do(req{method: "POST", path: "/payments", account: "acct_1", key: "pay-1", body: body}); r.status != http.StatusCreated || r.replayed() {
		t.Fatalf("the retry: %s, want 201 executed", r)
	}
	if r := e.do(req{method: "POST", path: "/payments", account: "acct_1", key: "pay-2", body: body}); r.status != http.StatusCreated {
		t.Fatalf("another payment: %s, want 201", r)
	}
	var charges, pay1 int
	if err := ppool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE reference = 'pay-1') FROM provider_charges`).Scan(&charges, &pay1); err != nil {
		t.Fatal(err)
	}
	if charges != 2 || pay1 != 1 {
		t.Fatalf("the provider holds %d charges, %d of them for pay-1; want 2 and 1 (the retry replayed its charge)", charges, pay1)
	}
	var replayed int
	if err := ppool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE operation = 'createCharge'`).Scan(&replayed); err != nil || replayed != 2 {
		t.Fatalf("the provider's keys: %d (%v), want 2", replayed, err)
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("%d business runs, want 3 (pay-1 twice, pay-2 once)", n)
	}
}
