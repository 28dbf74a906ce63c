package e2e

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/gen/testdata/golden/client"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// charges implements the client case's IdempotentServerInterface; every execution of a
// marked operation inserts a row of runs in its transaction.
type charges struct{ runs atomic.Int32 }

func (s *charges) run(ctx context.Context, tx idem.Tx, what string) error {
	s.runs.Add(1)
	_, err := tx.Exec(ctx, `INSERT INTO runs (what) VALUES ($1)`, what)
	return err
}

func (s *charges) CreateCharge(ctx context.Context, tx idem.Tx, req client.CreateChargeRequestObject) (client.CreateChargeResponseObject, error) {
	if err := s.run(ctx, tx, "charge "+req.AccountId); err != nil {
		return nil, err
	}
	return client.CreateCharge201JSONResponse{Id: "ch_" + strconv.Itoa(int(s.runs.Load())), Amount: req.Body.Amount}, nil
}

func (s *charges) CreateTransfer(ctx context.Context, tx idem.Tx, req client.CreateTransferRequestObject) (client.CreateTransferResponseObject, error) {
	if err := s.run(ctx, tx, "transfer"); err != nil {
		return nil, err
	}
	id := "tr_" + strconv.Itoa(req.Body.Amount)
	return client.CreateTransfer201JSONResponse{Id: &id}, nil
}

func (s *charges) UploadReceipt(ctx context.Context, tx idem.Tx, req client.UploadReceiptRequestObject) (client.UploadReceiptResponseObject, error) {
	part, err := req.Body.NextPart()
	if err != nil {
		return nil, err
	}
	data, _ := io.ReadAll(part)
	if err := s.run(ctx, tx, "receipt "+string(data)); err != nil {
		return nil, err
	}
	return client.UploadReceipt204Response{}, nil
}

func (s *charges) CreateSubscription(ctx context.Context, tx idem.Tx, req client.CreateSubscriptionRequestObject) (client.CreateSubscriptionResponseObject, error) {
	plan := ""
	if req.JSONBody != nil {
		plan = "json " + req.JSONBody.Plan
	} else if req.FormdataBody != nil {
		plan = "form " + req.FormdataBody.Plan
	}
	if err := s.run(ctx, tx, "subscription "+plan); err != nil {
		return nil, err
	}
	return client.CreateSubscription201Response{}, nil
}

func (s *charges) JoinNewsletter(ctx context.Context, tx idem.Tx, req client.JoinNewsletterRequestObject) (client.JoinNewsletterResponseObject, error) {
	if err := s.run(ctx, tx, "newsletter"); err != nil {
		return nil, err
	}
	return client.JoinNewsletter204Response{}, nil
}

func (s *charges) ListCharges(ctx context.Context, req client.ListChargesRequestObject) (client.ListChargesResponseObject, error) {
	return client.ListCharges200JSONResponse{{Id: "ch_1", Amount: 1}}, nil
}

// buffered is a ResponseWriter that keeps the answer.
type buffered struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *buffered) Header() http.Header { return b.header }
func (b *buffered) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}
func (b *buffered) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// losingFirst serves h, but for every odd-numbered request it lets h run to the end
// (the business commits) and then closes the connection without the answer: a response
// lost after the server processed the request.
func losingFirst(h http.Handler) (http.Handler, *atomic.Int32) {
	var n atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &buffered{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if n.Add(1)%2 == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.code)
		w.Write(rec.body.Bytes())
	}), &n
}

// TestGeneratedClient: the client case's IdempotentClient against its own server, each
// first answer lost after the business committed: every marked call (a uuid key header
// minted per call, a key put in the JSON body at /meta/request_key, in a form field, in
// either of a JSON and a form body, a multipart body read from a plain reader) is retried
// with its key and answered by the replay; each ran once and its recorded key is the
// call's. The unmarked operation is oapi-codegen's client's.
func TestGeneratedClient(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE runs (id bigserial PRIMARY KEY, what text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	impl := &charges{}
	store := idem.NewStore(pool)
	strict := client.NewStrictHandlerWithOptions(client.NewIdempotentStrictServer(impl, store), nil, client.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: store.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	h, served := losingFirst(client.HandlerWithOptions(strict, client.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := client.NewIdempotentClient(srv.URL, &idemclient.Client{BaseDelay: 1}, client.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
	if err != nil {
		t.Fatal(err)
	}
	recorded := func(key string) (op string) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT operation FROM idempotency_keys WHERE key = $1 AND status = 'completed'`, key).Scan(&op); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		return op
	}
	check := func(name string, res *idemclient.Result, err error, status, want int) {
		t.Helper()
		if err != nil || res.Attempts != 2 || !res.Replayed || status != want {
			t.Fatalf("%s: err %v, status %d, result %+v; want %d replayed on the second attempt", name, err, status, res, want)
		}
	}

	ch, res, err := c.CreateCharge(ctx, "acct_1", nil, client.CreateChargeJSONRequestBody{Amount: 250, Currency: "EUR"})
	check("createCharge", res, err, ch.StatusCode(), 201)
	if ch.JSON201 == nil || ch.JSON201.Id != "ch_1" || len(res.Key) != 36 || recorded(res.Key) != "createCharge" {
		t.Errorf("createCharge answered %s with key %q", ch.Body, res.Key)
	}

	tr, res, err := c.CreateTransfer(ctx, client.CreateTransferJSONRequestBody{Amount: 7})
	check("createTransfer", res, err, tr.StatusCode(), 201)
	if tr.JSON201 == nil || *tr.JSON201.Id != "tr_7" || recorded(res.Key) != "createTransfer" {
		t.Errorf("createTransfer answered %s with key %q", tr.Body, res.Key)
	}
	// A key of the caller's in the body is the key.
	own := "transfer-8"
	tr, res, err = c.CreateTransfer(ctx, client.CreateTransferJSONRequestBody{Amount: 8, Meta: &struct {
		RequestKey *string `json:"request_key,omitempty"`
	}{RequestKey: &own}}, idemclient.WithKey("ignored"))
	check("createTransfer with its own key", res, err, tr.StatusCode(), 201)
	if res.Key != own || recorded(own) != "createTransfer" {
		t.Errorf("key %q, want the body's %q", res.Key, own)
	}

	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", "r.txt")
	fw.Write([]byte("lunch 12.50"))
	mw.Close()
	up, res, err := c.UploadReceiptWithBody(ctx, nil, mw.FormDataContentType(), io.MultiReader(&mp), idemclient.WithKey("receipt-1"))
	check("uploadReceipt", res, err, up.StatusCode(), 204)
	if res.Key != "receipt-1" || recorded("receipt-1") != "uploadReceipt" {
		t.Errorf("uploadReceipt key %q", res.Key)
	}

	// Keys in form bodies: the form field, minted (minLength 8 is met by a UUID); for an
	// operation taking JSON or a form, the content type sent picks the place.
	nl, res, err := c.JoinNewsletterWithFormdataBody(ctx, client.JoinNewsletterFormdataRequestBody{})
	check("joinNewsletter", res, err, nl.StatusCode(), 204)
	if recorded(res.Key) != "joinNewsletter" {
		t.Errorf("joinNewsletter key %q", res.Key)
	}
	sub, res, err := c.CreateSubscriptionWithFormdataBody(ctx, client.CreateSubscriptionFormdataRequestBody{Plan: "pro"})
	check("createSubscription (form)", res, err, sub.StatusCode(), 201)
	formKey := res.Key
	sub, res, err = c.CreateSubscription(ctx, client.CreateSubscriptionJSONRequestBody{Plan: "pro"})
	check("createSubscription (json)", res, err, sub.StatusCode(), 201)
	if recorded(formKey) != "createSubscription" || recorded(res.Key) != "createSubscription" || formKey == res.Key {
		t.Errorf("createSubscription keys %q (form) and %q (json)", formKey, res.Key)
	}

	const calls = 7
	var runs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != calls || impl.runs.Load() != calls {
		t.Errorf("%d runs committed (%d executions), want %d: one per call", runs, impl.runs.Load(), calls)
	}
	if served.Load() != 2*calls {
		t.Errorf("the server saw %d requests, want %d (two per call)", served.Load(), 2*calls)
	}

	// Unmarked: oapi-codegen's client, sent once (the odd request: its answer is lost).
	if _, err := c.ListChargesWithResponse(ctx, "acct_1"); err == nil {
		t.Errorf("listCharges: its answer was dropped, yet no error: was it retried?")
	}
	if served.Load() != 2*calls+1 {
		t.Errorf("listCharges was sent %d times, want once", served.Load()-2*calls)
	}
}
