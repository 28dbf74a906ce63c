package payments_test

import (
	"context"
	"errors"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemprom"
	"github.com/idemgen/idemgen/idem/idemredis"
	"github.com/idemgen/idemgen/idem/idemvalidate"
)

// Payments implements the generated api.IdempotentServerInterface.
type Payments struct{ pool *pgxpool.Pool }

// CreatePayment is marked x-idempotent, so it gets the transaction of its idempotency key:
// its writes commit together with the key's recorded response, or not at all.
func (s *Payments) CreatePayment(ctx context.Context, tx idem.Tx, req api.CreatePaymentRequestObject) (api.CreatePaymentResponseObject, error) {
	key, _ := idem.KeyFromContext(ctx) // pass key.Key downstream, e.g. as the PSP's idempotency key
	p, err := db.New(tx).InsertPayment(ctx, db.InsertPaymentParams{
		AccountID: key.Scope, Amount: req.Body.Amount, Currency: req.Body.Currency,
		IdempotencyScope: key.Scope, IdempotencyKey: key.Key,
	})
	if err != nil {
		return nil, err // rolled back; the key is released, so a retry runs again
	}
	return api.CreatePayment201JSONResponse{Body: api.Payment{
		Id: p.ID, Amount: p.Amount, Currency: p.Currency, Status: api.Succeeded, CreatedAt: p.CreatedAt.Time,
	}}, nil
}

// GetPayment is not marked x-idempotent: it keeps oapi-codegen's strict signature.
func (s *Payments) GetPayment(ctx context.Context, req api.GetPaymentRequestObject) (api.GetPaymentResponseObject, error) {
	return nil, errors.New("not in this example: see service/service.go")
}

// StarPayment is marked x-idempotent with store: redis, so it gets no transaction: its
// key lives in Redis. Its write commits on its own before it returns, and only then is
// the key completed: a lost completion can count a star twice, never replay one that
// was not counted.
func (s *Payments) StarPayment(ctx context.Context, req api.StarPaymentRequestObject) (api.StarPaymentResponseObject, error) {
	key, _ := idem.KeyFromContext(ctx)
	row, err := db.New(s.pool).StarPayment(ctx, db.StarPaymentParams{ID: req.Id, AccountID: key.Scope})
	if err != nil {
		return nil, err // nothing counted; the key is released, so a retry runs again
	}
	return api.StarPayment200JSONResponse{PaymentId: row.PaymentID, Stars: row.Stars}, nil
}

// CreateRefund is marked x-idempotent.
func (s *Payments) CreateRefund(ctx context.Context, tx idem.Tx, req api.CreateRefundRequestObject) (api.CreateRefundResponseObject, error) {
	return nil, errors.New("not in this example: see service/service.go")
}

// accountKey is the context key of the authenticated account.
type accountKey struct{}

// authenticate stands for your authentication middleware: it puts the account in the
// request's context.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account := r.Header.Get("X-Account-ID") // a stand-in for real authentication
		if account == "" {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, account)))
	})
}

// accountScope is the idempotency scope: the same key from two accounts is two requests.
func accountScope(ctx context.Context) (string, error) {
	account, ok := ctx.Value(accountKey{}).(string)
	if !ok {
		return "", errors.New("no account in the request context")
	}
	return account, nil
}

// handler wires the generated API: requests validated against api's own spec, the store
// with its scope and metrics, the Redis store of the operations marked store: redis, and
// the handlers with the store's error handler for the requests (the protocol's rejection
// shape) and idem's for the responses. It returns the store for the purger.
func handler(ctx context.Context, pool *pgxpool.Pool, rdb redis.UniversalClient, reg prometheus.Registerer) (http.Handler, *idem.Store, error) {
	outcomes := idemprom.NewOutcomes()
	store := idem.NewStore(pool, idem.WithScope(accountScope), idem.WithObserver(outcomes.Observe))
	reg.MustRegister(outcomes, idemprom.NewStoreCollector(store, time.Hour))
	// starPayment (a rare duplicate star is acceptable) keeps its keys in Redis, with the
	// same scope and metrics; New refuses a server whose maxmemory-policy may evict them.
	stars, err := idemredis.New(ctx, rdb, idemredis.WithScope(accountScope), idemredis.WithObserver(outcomes.Observe))
	if err != nil {
		return nil, nil, err
	}

	// store.RequestErrorHandler answers undecodable and invalid requests (400, 413) in the
	// same shape as the protocol's own rejections (problem+json, or WithRejectionRenderer's).
	// idem bounds the marked operations (acquire, flights, the policy's timeout); the
	// unmarked ones (GetPayment) get a deadline here, or a frozen database holds them for
	// as long as their client waits.
	bound := func(f api.StrictHandlerFunc, operationID string) api.StrictHandlerFunc {
		if operationID != "GetPayment" {
			return f
		}
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // answered 503 + Retry-After
			defer cancel()
			return f(ctx, w, r, req)
		}
	}
	strict := api.NewStrictHandlerWithOptions(api.NewIdempotentStrictServer(&Payments{pool: pool}, store, stars),
		[]api.StrictMiddlewareFunc{bound},
		api.StrictHTTPServerOptions{
			RequestErrorHandlerFunc:  store.RequestErrorHandler,
			ResponseErrorHandlerFunc: idem.ResponseErrorHandler, // 500 problem; logs the error with slog
		})
	h := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler})

	// Requests that break the spec (a missing field, a value out of range, a member named
	// like a field in another case) get a 400 problem before the protocol claims their key.
	spec, err := api.OpenAPI() // the spec package api was generated from (api/spec.gen.go)
	if err != nil {
		return nil, nil, err
	}
	validate, err := idemvalidate.Middleware(spec, store.RequestErrorHandler)
	if err != nil {
		return nil, nil, err
	}
	return http.MaxBytesHandler(authenticate(validate(h)), 1<<20), store, nil
}

// A server for the generated API of examples/payments (TestWiring runs the same handler).
// SIGINT or SIGTERM shuts it down gracefully: it stops accepting, lets the requests in
// flight finish (their keys complete, or roll back and are released), then stops the
// purger.
func Example_server() {
	signaled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	// Closed last, after the server has drained and the purger has stopped.
	defer pool.Close()
	if err := idem.Migrate(ctx, pool); err != nil { // or apply migrations/ with your tool
		log.Fatal(err)
	}
	if err := db.Migrate(ctx, pool); err != nil { // the service's own tables
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	h, store, err := handler(ctx, pool, rdb, prometheus.DefaultRegisterer)
	if err != nil {
		log.Fatal(err)
	}

	// The purger deletes keys past their retention, every 10 minutes, until purging ends.
	purging, stopPurging := context.WithCancel(ctx)
	purged := make(chan struct{})
	go func() {
		defer close(purged)
		idem.NewPurger(store, 10*time.Minute, 1000, nil).Run(purging) // logs with slog
	}()

	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("GET /metrics", promhttp.Handler())
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case err := <-served: // the port is taken, say
		log.Print(err)
	case <-signaled.Done():
		// Stop accepting and drain: give the requests in flight 30 s (more than the
		// operations' timeout) to finish; cut off what remains (their transactions roll
		// back and release their keys, so a retry runs).
		drain, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(drain); err != nil {
			log.Printf("shutdown: %v; closing the remaining connections", err)
			srv.Close()
		}
	}
	stopPurging()
	<-purged
}
