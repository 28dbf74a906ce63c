package payments_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
	"github.com/idemgen/idemgen/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// The wiring quoted in the README serves: a payment, its replay, the 401 of the
// authentication stand-in, and the outcomes in the registry.
func TestWiring(t *testing.T) {
	pool := idemtest.Pool(t, idemtest.NewDB(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // stops the purger
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr()})
	defer rdb.Close()
	h, store, err := handler(ctx, pool, rdb, reg)
	if err != nil {
		t.Fatal(err)
	}
	go idem.NewPurger(store, time.Hour, 1000, nil).Run(ctx)
	srv := httptest.NewServer(h)
	defer srv.Close()

	send := func(account, body string) (status int, replayed, answer string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-42")
		if account != "" {
			req.Header.Set("X-Account-ID", account)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b)
	}
	post := func(account string) (status int, replayed, body string) {
		t.Helper()
		return send(account, `{"amount":1999,"currency":"EUR"}`)
	}
	// Members named like a field in another case: encoding/json would decode them into
	// the field (9×10¹⁴ is over the spec's maximum; "eur" breaks its pattern and the
	// table's CHECK), so validation refuses them before the key is claimed.
	for _, body := range []string{
		`{"amount":1999,"currency":"EUR","AMOUNT":900000000000000}`,
		`{"amount":1999,"currency":"EUR","Currency":"eur"}`,
	} {
		if status, _, answer := send("acct_1", body); status != http.StatusBadRequest || !strings.Contains(answer, "only by case") {
			t.Errorf("%s: %d %s, want a 400 problem naming the member", body, status, answer)
		}
	}
	var keys int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&keys); err != nil || keys != 0 {
		t.Fatalf("%d keys (%v) after the refused requests, want 0: nothing is claimed", keys, err)
	}
	status, replayed, first := post("acct_1")
	if status != http.StatusCreated || replayed != "" || !strings.Contains(first, `"amount":1999`) {
		t.Fatalf("first POST: %d, replayed %q, %s", status, replayed, first)
	}
	status, replayed, again := post("acct_1")
	if status != http.StatusCreated || replayed != "true" || again != first {
		t.Fatalf("retry: %d, replayed %q, %s; want the first 201 replayed byte for byte (%s)", status, replayed, again, first)
	}
	if status, _, _ := post(""); status != http.StatusUnauthorized {
		t.Fatalf("no account: %d, want 401", status)
	}
	var id string
	if err := pool.QueryRow(ctx, `SELECT id FROM payments`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"", "true"} { // counted, then replayed
		req, _ := http.NewRequest("POST", srv.URL+"/payments/"+id+"/star", nil)
		req.Header.Set("Idempotency-Key", "star-1")
		req.Header.Set("X-Account-ID", "acct_1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != want || !strings.Contains(string(b), `"stars":1`) {
			t.Fatalf("star: %d, replayed %q, %s; want 200 with one star", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), b)
		}
	}
	var payments int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&payments); err != nil || payments != 1 {
		t.Fatalf("%d payments (%v), want 1", payments, err)
	}
	if n, err := testutil.GatherAndCount(reg, "idem_outcomes_total", "idem_stale_claims", "idem_repeated_payloads"); err != nil || n < 4 {
		t.Fatalf("metrics: %d series (%v); want outcomes and both gauges", n, err)
	}
}
