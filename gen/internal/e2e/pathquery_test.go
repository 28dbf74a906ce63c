package e2e

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/gen/testdata/golden/pathquery"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// accounts implements pathquery's IdempotentServerInterface.
type accounts struct{ calls atomic.Int32 }

func (a *accounts) CreateAccountTransfer(ctx context.Context, tx idem.Tx, req pathquery.CreateAccountTransferRequestObject) (pathquery.CreateAccountTransferResponseObject, error) {
	a.calls.Add(1)
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		return nil, err
	}
	return pathquery.CreateAccountTransfer201Response{}, nil
}

func (a *accounts) LockAccount(ctx context.Context, tx idem.Tx, req pathquery.LockAccountRequestObject) (pathquery.LockAccountResponseObject, error) {
	a.calls.Add(1)
	return pathquery.LockAccount204Response{}, nil
}

// Path and query parameters are part of the fingerprint: the same key and body for
// another account, or with another query value, is a 422, never a replay of the first
// request's answer; the same request again is a replay.
func TestPathAndQueryInTheFingerprint(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	impl := &accounts{}
	srv := httptest.NewServer(pathquery.Handler(pathquery.NewStrictHandler(pathquery.NewIdempotentStrictServer(impl, idem.NewStore(pool)), nil)))
	t.Cleanup(srv.Close)
	key := map[string]string{"Idempotency-Key": "transfer-1", "X-Trace-Id": "a"}
	body := `{"to": "acct_9", "amount": 10}`
	first := send(t, srv, "POST", "/accounts/acct_1/transfers?currency=EUR", key, "application/json", body)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	key["X-Trace-Id"] = "b" // a header outside the fingerprint: still the same request
	if again := send(t, srv, "POST", "/accounts/acct_1/transfers?currency=EUR", key, "application/json", body); again.status != 201 || again.header.Get(idem.ReplayedHeader) != "true" {
		t.Errorf("the same request: %d %v, want a replay", again.status, again.header)
	}
	for _, path := range []string{"/accounts/acct_2/transfers?currency=EUR", "/accounts/acct_1/transfers?currency=USD", "/accounts/acct_1/transfers?currency=EUR&dryRun=true"} {
		if r := send(t, srv, "POST", path, key, "application/json", body); r.status != 422 {
			t.Errorf("%s with the same key and body: %d %v %s, want 422", path, r.status, r.header, r.body)
		}
	}
	if n := impl.calls.Load(); n != 1 {
		t.Errorf("business ran %d times, want 1", n)
	}
}
