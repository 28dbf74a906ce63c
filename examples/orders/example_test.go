package orders_test

import (
	"context"
	"errors"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/orders/api"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemvalidate"
)

// Orders implements the generated api.IdempotentServerInterface.
type Orders struct{}

// CreateOrder is marked x-idempotent, so it gets the transaction of its idempotency key:
// its writes commit together with the key's recorded response, or not at all.
func (Orders) CreateOrder(ctx context.Context, tx idem.Tx, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO orders (sku, qty) VALUES ($1, $2) RETURNING id`,
		req.Body.Sku, req.Body.Qty).Scan(&id)
	if err != nil {
		return nil, err // rolled back; the key is released, so a retry runs again
	}
	return api.CreateOrder201JSONResponse{Id: id, Sku: req.Body.Sku, Qty: req.Body.Qty}, nil
}

// tenantKey is the context key of the request's tenant.
type tenantKey struct{}

// withTenant stands for your authentication: it puts the caller's tenant in the request's
// context, here from a header.
func withTenant(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), tenantKey{}, r.Header.Get("X-Tenant-ID"))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// tenantScope is the idempotency scope: the same key from two tenants is two requests.
func tenantScope(ctx context.Context) (string, error) {
	tenant, _ := ctx.Value(tenantKey{}).(string)
	if tenant == "" {
		return "", &idem.Problem{Status: http.StatusUnauthorized, Title: "Unauthorized", Detail: "no X-Tenant-ID"}
	}
	return tenant, nil
}

// newHandler wires the generated API on a pool: the store with its scope, the handlers
// (orders: Orders{}; a test's wrapper in tests) with the store's error handler, and
// requests validated against api's own spec.
func newHandler(pool *pgxpool.Pool, orders api.IdempotentServerInterface) (http.Handler, error) {
	store := idem.NewStore(pool, idem.WithScope(tenantScope))
	strict := api.NewStrictHandlerWithOptions(api.NewIdempotentStrictServer(orders, store), nil,
		api.StrictHTTPServerOptions{
			RequestErrorHandlerFunc:  store.RequestErrorHandler,
			ResponseErrorHandlerFunc: idem.ResponseErrorHandler, // 500 problem; logs the error with slog
		})
	h := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler})
	spec, err := api.OpenAPI() // the spec package api was generated from (api/spec.gen.go)
	if err != nil {
		return nil, err
	}
	validate, err := idemvalidate.Middleware(spec, store.RequestErrorHandler)
	if err != nil {
		return nil, err
	}
	return withTenant(validate(h)), nil
}

// migrate creates the table of idempotency keys and the service's own.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := idem.Migrate(ctx, pool); err != nil { // or apply migrations/ with your tool
		return err
	}
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, sku text NOT NULL, qty int NOT NULL)`)
	return err
}

// A server for the orders API: your cmd/orders/main.go.
func Example_server() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	h, err := newHandler(pool, Orders{})
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: ":8080", Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
