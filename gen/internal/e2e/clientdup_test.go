package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/gen/testdata/golden/client"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// heldCharges is createCharge whose first run waits for release.
type heldCharges struct {
	charges
	started, release chan struct{}
	first            atomic.Bool
}

func (s *heldCharges) CreateCharge(ctx context.Context, tx idem.Tx, req client.CreateChargeRequestObject) (client.CreateChargeResponseObject, error) {
	if s.first.CompareAndSwap(false, true) {
		close(s.started)
		<-s.release
	}
	if err := s.run(ctx, tx, "charge "+req.AccountId); err != nil {
		return nil, err
	}
	return client.CreateCharge201JSONResponse{Id: "ch_" + strconv.Itoa(int(s.runs.Load())), Amount: req.Body.Amount}, nil
}

// A duplicate of a call still running (lease 30s, no timeout) under the README's 30s
// deadline: the server's 409 asks for a retry in a second, not after the longest the owner
// could hold the key, so the generated client retries and gets the owner's replay once it
// finished, instead of returning the 409 because the wait would outlast its deadline.
func TestGeneratedClientDuplicateOfARunningCallGetsTheReplay(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE runs (id bigserial PRIMARY KEY, what text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	impl := &heldCharges{started: make(chan struct{}), release: make(chan struct{})}
	store := idem.NewStore(pool)
	strict := client.NewStrictHandlerWithOptions(client.NewIdempotentStrictServer(impl, store), nil, client.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: store.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	srv := httptest.NewServer(client.HandlerWithOptions(strict, client.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler}))
	defer srv.Close()
	conflicts := make(chan struct{}, 16)
	c, err := client.NewIdempotentClient(srv.URL, &idemclient.Client{OnAttempt: func(a idemclient.Attempt) {
		if a.Status == http.StatusConflict {
			conflicts <- struct{}{}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	key := idemclient.WithKey("3f0c9d3e-8a9b-4c47-9a51-2b8f0d6f1a10")
	body := client.CreateChargeJSONRequestBody{Amount: 250, Currency: "EUR"}

	owner := make(chan error, 1)
	go func() {
		_, _, err := c.CreateCharge(ctx, "acct_1", nil, body, key)
		owner <- err
	}()
	<-impl.started
	dup := make(chan struct{})
	var (
		resp *client.CreateChargeResponse
		res  *idemclient.Result
		derr error
	)
	go func() {
		defer close(dup)
		resp, res, derr = c.CreateCharge(ctx, "acct_1", nil, body, key)
	}()
	<-conflicts // the duplicate met the running owner
	close(impl.release)
	if err := <-owner; err != nil {
		t.Fatal(err)
	}
	<-dup
	if derr != nil || resp.StatusCode() != http.StatusCreated || !res.Replayed || res.Attempts < 2 {
		t.Fatalf("duplicate: err %v, status %d, result %+v; want the owner's 201 replayed after a 409", derr, resp.StatusCode(), res)
	}
	if n := impl.runs.Load(); n != 1 {
		t.Errorf("the business ran %d times, want 1", n)
	}
}
