// Package service is the payments example's HTTP service: the business code behind the
// handlers that idemgen generated from ../openapi.yaml (package api), its wiring
// ([New]), the account middleware that supplies the idempotency scope, and the
// exactly-once audit ([Audit]).
//
// What runs where, for POST /payments:
//
//	http.MaxBytesHandler            body over Options.MaxBodyBytes → 413 problem
//	requireAccount                  no X-Account-ID → 401 problem; else the account in ctx
//	idemvalidate                    the request against openapi.yaml (kin-openapi's
//	                                openapi3filter): amount, currency, description, bad or
//	                                trailing JSON → 400 problem, before any SQL
//	api (oapi-codegen)              decodes the JSON body
//	api (idemgen)                   the idempotency protocol: key → claim → one transaction
//	server.CreatePayment            business writes through the transaction it is handed
//
// Validation runs before the protocol on purpose: a request that fails it never claims
// its key, so the client can fix the body and retry with the same key. Business refusals
// (a refund over what remains, a refund of an unknown payment) are decided inside the
// transaction and are ordinary answers: committed with the key and replayed on retries.
package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/examples/payments/db"
	providerapi "github.com/idemgen/idemgen/examples/payments/provider/api"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/idem/idemredis"
	"github.com/idemgen/idemgen/idem/idemvalidate"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// ProblemRefundExceedsRemaining is the problem type of a refund larger than what remains
// of its payment (422).
const ProblemRefundExceedsRemaining = "https://github.com/idemgen/idemgen/tree/main/examples/payments#refund-exceeds-remaining"

// Options configure [New]. The zero value is valid.
type Options struct {
	// Delay is simulated downstream latency (a payment provider's call), spent inside the
	// business transaction of both POST operations, so that concurrent duplicates overlap
	// a request in flight. It respects the request's context.
	Delay time.Duration
	// Downstream, when set, replaces the Delay: it is called inside the business
	// transaction of both POST operations, after their writes, where a real service would
	// call its payment provider (passing idem.KeyFromContext(ctx) on as the provider's
	// idempotency key). An error rolls the transaction back (500; the key is released).
	Downstream func(ctx context.Context) error
	// MaxBodyBytes limits request bodies (413 beyond). Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logf, when set, receives the errors answered with 500 (whose bodies do not carry
	// them).
	Logf func(format string, args ...any)
	// Observer, when set, sees every outcome of the idempotency protocol (metrics).
	Observer idem.Observer
	// BeforeStar, when set, is called inside starPayment before its write (nothing is
	// counted yet): simulated latency (the server's -star-delay), or the window in which
	// a test kills the server or Redis mid-business. An error fails the request (500;
	// the key is released).
	BeforeStar func(ctx context.Context) error
	// Redis is the idempotency store of the operations marked store: redis (starPayment).
	// Without one they answer 503 and the others run as usual.
	Redis *idemredis.Store
	// StoreOptions are passed on to idem.NewStore (deadlines, stale age, ...).
	StoreOptions []idem.Option
	// Provider, when set, is the payment provider's client (the stand-in of package
	// provider): createPayment charges each payment with it, inside its business
	// transaction, under a key derived from the payment's own (KeyInfo.Derive("charge")),
	// so a payment rolled back after the charge and run again (a lost COMMIT, a crash)
	// charges once. A failed charge rolls the payment back (500; the key is released).
	Provider *providerapi.IdempotentClient
	// UnmarkedTimeout bounds each operation without x-idempotent (GET /payments/{id}):
	// its context ends then, and with it its pool acquire and its statements, answered
	// 503 with Retry-After (idem.ResponseErrorHandler). The marked operations have the
	// protocol's bounds (acquire, flights, the policy's timeout). Zero means
	// DefaultUnmarkedTimeout.
	UnmarkedTimeout time.Duration
}

// DefaultUnmarkedTimeout is Options.UnmarkedTimeout's default: the marked operations'
// business timeout in openapi.yaml.
const DefaultUnmarkedTimeout = 10 * time.Second

// unmarked are the operations of openapi.yaml without x-idempotent, by the names
// oapi-codegen's strict middlewares get (TestUnmarkedOperationsAreBounded checks the list
// against the generated interface).
var unmarked = map[string]bool{"GetPayment": true}

// boundUnmarked is a strict middleware that gives the unmarked operations a deadline
// (without one a GET on a frozen database, or behind an exhausted pool, would wait for as
// long as its client does).
func boundUnmarked(timeout time.Duration) api.StrictMiddlewareFunc {
	if timeout <= 0 {
		timeout = DefaultUnmarkedTimeout
	}
	return func(f api.StrictHandlerFunc, operationID string) api.StrictHandlerFunc {
		if !unmarked[operationID] {
			return f
		}
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return f(ctx, w, r, request)
		}
	}
}

// Setup applies the schemas the service needs: idem's idempotency_keys table and the
// example's own tables. Both are re-runnable.
func Setup(ctx context.Context, pool *pgxpool.Pool) error {
	if err := idem.Migrate(ctx, pool); err != nil {
		return err
	}
	return db.Migrate(ctx, pool)
}

// New returns the service's HTTP handler on pool (see [Setup] for the tables).
func New(pool *pgxpool.Pool, opts Options) http.Handler {
	storeOpts := []idem.Option{idem.WithScope(scope)}
	if opts.Observer != nil {
		storeOpts = append(storeOpts, idem.WithObserver(opts.Observer))
	}
	storeOpts = append(storeOpts, opts.StoreOptions...)
	store := idem.NewStore(pool, storeOpts...)
	impl := &server{pool: pool, delay: opts.Delay, downstreamFunc: opts.Downstream, beforeStar: opts.BeforeStar, provider: opts.Provider}

	responseError := idem.ResponseErrorHandler // logs with slog
	if opts.Logf != nil {
		responseError = idem.NewResponseErrorHandler(func(r *http.Request, err error) {
			opts.Logf("%s %s: %v", r.Method, r.URL.Path, err)
		})
	}
	var srv api.StrictServerInterface = api.NewIdempotentStrictServer(impl, store, opts.Redis)
	if opts.Redis == nil {
		srv = withoutRedis{srv}
	}
	strict := api.NewStrictHandlerWithOptions(srv, []api.StrictMiddlewareFunc{boundUnmarked(opts.UnmarkedTimeout)},
		api.StrictHTTPServerOptions{
			RequestErrorHandlerFunc:  store.RequestErrorHandler, // 400 (413) in the protocol's rejection shape
			ResponseErrorHandlerFunc: responseError,
		})
	h := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler})

	limit := opts.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	return http.MaxBytesHandler(requireAccount(ValidateRequests(h)), limit)
}

// ValidateRequests checks requests against openapi.yaml (api.OpenAPI) before the handlers (and the
// protocol) see them, answering 400 problems: the spec states the constraints, nothing
// here repeats them. (The benchmarks put it in front of their bare handler too, so it
// needs no store: idem.RequestErrorHandler writes what the store's RequestErrorHandler
// writes for a store without idem.WithRejectionRenderer, as this service's is. A service
// that renders its own error shape passes its store's method instead.)
var ValidateRequests = func() func(http.Handler) http.Handler {
	spec, err := api.OpenAPI() // the spec api was generated from (api/spec.gen.go)
	if err != nil {
		panic(fmt.Sprintf("the embedded openapi.yaml: %v", err)) // tested: see service_test.go
	}
	mw, err := idemvalidate.Middleware(spec, idem.RequestErrorHandler)
	if err != nil {
		panic(err)
	}
	return mw
}()

// server implements api.IdempotentServerInterface.
type server struct {
	pool           *pgxpool.Pool
	delay          time.Duration
	downstreamFunc func(ctx context.Context) error
	beforeStar     func(ctx context.Context) error
	provider       *providerapi.IdempotentClient
}

var _ api.IdempotentServerInterface = (*server)(nil)

// CreatePayment runs inside the idempotency protocol: its writes commit together with the
// completion of the key, or not at all.
func (s *server) CreatePayment(ctx context.Context, tx idem.Tx, req api.CreatePaymentRequestObject) (api.CreatePaymentResponseObject, error) {
	key, ok := idem.KeyFromContext(ctx)
	if !ok { // the policy requires a key: the protocol never runs us without one
		return nil, errors.New("createPayment: no idempotency key")
	}
	body := req.Body
	p, err := db.New(tx).InsertPayment(ctx, db.InsertPaymentParams{
		AccountID:        mustAccount(ctx),
		Amount:           body.Amount,
		Currency:         body.Currency,
		Description:      textOrNull(body.Description),
		IdempotencyScope: key.Scope,
		IdempotencyKey:   key.Key,
	})
	if err != nil {
		return nil, fmt.Errorf("insert payment: %w", err)
	}
	if s.provider != nil {
		if err := s.charge(ctx, key, body.Amount, body.Currency); err != nil {
			return nil, err
		}
	}
	if err := s.downstream(ctx); err != nil {
		return nil, err
	}
	loc := "/payments/" + p.ID
	return api.CreatePayment201JSONResponse{Body: toPayment(p), Headers: api.CreatePayment201ResponseHeaders{Location: &loc}}, nil
}

// GetPayment is not marked x-idempotent: it keeps oapi-codegen's strict signature.
func (s *server) GetPayment(ctx context.Context, req api.GetPaymentRequestObject) (api.GetPaymentResponseObject, error) {
	p, err := db.New(s.pool).GetPayment(ctx, db.GetPaymentParams{ID: req.Id, AccountID: mustAccount(ctx)})
	if errors.Is(err, pgx.ErrNoRows) {
		return api.GetPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: notFound(req.Id)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get payment: %w", err)
	}
	return api.GetPayment200JSONResponse(toPayment(p)), nil
}

// CreateRefund runs inside the idempotency protocol. Refusals (unknown payment, amount
// over what remains) are answers like the 201: stored with the key and replayed.
func (s *server) CreateRefund(ctx context.Context, tx idem.Tx, req api.CreateRefundRequestObject) (api.CreateRefundResponseObject, error) {
	key, ok := idem.KeyFromContext(ctx)
	if !ok {
		return nil, errors.New("createRefund: no idempotency key")
	}
	q := db.New(tx)
	// Lock the payment: refunds of one payment under different keys serialise here.
	p, err := q.LockPayment(ctx, db.LockPaymentParams{ID: req.Id, AccountID: mustAccount(ctx)})
	if errors.Is(err, pgx.ErrNoRows) {
		return api.CreateRefund404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: notFound(req.Id)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock payment: %w", err)
	}
	if remaining := p.Amount - p.AmountRefunded; req.Body.Amount > remaining {
		typ := ProblemRefundExceedsRemaining
		detail := fmt.Sprintf("a refund of %d exceeds the %d that remain of payment %s (minor units of %s; amount %d, refunded %d)",
			req.Body.Amount, remaining, p.ID, p.Currency, p.Amount, p.AmountRefunded)
		return api.CreateRefund422ApplicationProblemPlusJSONResponse{
			Type: &typ, Title: "Refund exceeds remaining amount", Status: http.StatusUnprocessableEntity, Detail: &detail,
		}, nil
	}
	r, err := q.InsertRefund(ctx, db.InsertRefundParams{
		AccountID: p.AccountID, PaymentID: p.ID, Amount: req.Body.Amount, IdempotencyScope: key.Scope, IdempotencyKey: key.Key,
	})
	if err != nil {
		return nil, fmt.Errorf("insert refund: %w", err)
	}
	if _, err := q.AddRefunded(ctx, db.AddRefundedParams{AccountID: p.AccountID, ID: p.ID, Amount: r.Amount}); err != nil {
		return nil, fmt.Errorf("update payment: %w", err)
	}
	if err := s.downstream(ctx); err != nil {
		return nil, err
	}
	return api.CreateRefund201JSONResponse{
		Id: r.ID, PaymentId: r.PaymentID, Amount: r.Amount, CreatedAt: r.CreatedAt.Time.UTC(),
	}, nil
}

// downstream stands for the payment provider's call: Options.Downstream, or a sleep of
// Options.Delay.
// charge charges the payment with the provider under the key derived from the payment's
// own (the same on every run of this request) and a request that is the same on every
// run too: the payment's key as the reference, not its id (new on every run: the
// provider would refuse its key with another payload).
func (s *server) charge(ctx context.Context, key idem.KeyInfo, amount int64, currency string) error {
	resp, _, err := s.provider.CreateCharge(ctx, nil, providerapi.NewCharge{Amount: amount, Currency: currency, Reference: key.Key},
		idemclient.WithKey(key.Derive("charge")))
	if err != nil {
		return fmt.Errorf("provider charge: %w", err)
	}
	if resp.JSON201 == nil {
		return fmt.Errorf("provider charge: %s %s", resp.Status(), resp.Body)
	}
	return nil
}

func (s *server) downstream(ctx context.Context) error {
	if s.downstreamFunc != nil {
		return s.downstreamFunc(ctx)
	}
	if s.delay <= 0 {
		return nil
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("downstream call: %w", context.Cause(ctx))
	}
}

func toPayment(p db.Payment) api.Payment {
	out := api.Payment{
		Id:        p.ID,
		Amount:    p.Amount,
		Currency:  p.Currency,
		Status:    api.Succeeded,
		CreatedAt: p.CreatedAt.Time.UTC(),
	}
	if p.Description.Valid {
		d := p.Description.String
		out.Description = &d
	}
	switch {
	case p.AmountRefunded == p.Amount:
		out.Status = api.Refunded
	case p.AmountRefunded > 0:
		out.Status = api.PartiallyRefunded
	}
	return out
}

func notFound(id string) api.NotFoundApplicationProblemPlusJSONResponse {
	detail := fmt.Sprintf("no payment %q in this account", id)
	return api.NotFoundApplicationProblemPlusJSONResponse{Title: http.StatusText(http.StatusNotFound), Status: http.StatusNotFound, Detail: &detail}
}

func textOrNull(s *string) pgtype.Text {
	if s == nil {
		return pgtype.Text{}
	}
	return pgtype.Text{String: *s, Valid: true}
}
