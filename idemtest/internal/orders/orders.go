// Package orders is a small service built with idemgen for idemtest's own tests: a
// marked POST and PUT, a declared Idempotency-Key of at most 64 bytes, a body whose
// qty is at least 1.
package orders

//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate -package api -o api openapi.yaml

import (
	"context"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemvalidate"
	"github.com/idemgen/idemgen/idemtest/internal/orders/api"
)

// Schema is the service's table.
const Schema = `CREATE TABLE IF NOT EXISTS orders (
	id text PRIMARY KEY,
	sku text NOT NULL,
	qty int NOT NULL
)`

// Hook runs inside each business transaction after its write; an error rolls it back.
// Tests pass an idemtest.Gate's Pass.
type Hook func(ctx context.Context) error

// Server implements api.IdempotentServerInterface.
type Server struct{ hook Hook }

// CreateOrder inserts an order with a new id.
func (s *Server) CreateOrder(ctx context.Context, tx idem.Tx, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	var id int64
	if err := tx.QueryRow(ctx, `SELECT count(*) + 1 FROM orders`).Scan(&id); err != nil {
		return nil, err
	}
	o, err := s.put(ctx, tx, "o-"+strconv.FormatInt(id, 10), *req.Body)
	if err != nil {
		return nil, err
	}
	return api.CreateOrder201JSONResponse(o), nil
}

// PutOrder stores the order under its id.
func (s *Server) PutOrder(ctx context.Context, tx idem.Tx, req api.PutOrderRequestObject) (api.PutOrderResponseObject, error) {
	o, err := s.put(ctx, tx, req.Id, *req.Body)
	if err != nil {
		return nil, err
	}
	return api.PutOrder200JSONResponse(o), nil
}

func (s *Server) put(ctx context.Context, tx idem.Tx, id string, n api.NewOrder) (api.Order, error) {
	_, err := tx.Exec(ctx, `INSERT INTO orders (id, sku, qty) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET sku = excluded.sku, qty = excluded.qty`, id, n.Sku, n.Qty)
	if err == nil && s.hook != nil {
		err = s.hook(ctx)
	}
	return api.Order{Id: id, Sku: n.Sku, Qty: n.Qty}, err
}

// Handler is the service's handler on pool (idem.Migrate and Schema applied), validated
// against its own spec; hook may be nil.
func Handler(pool *pgxpool.Pool, hook Hook) (http.Handler, error) {
	store := idem.NewStore(pool)
	strict := api.NewStrictHandlerWithOptions(api.NewIdempotentStrictServer(&Server{hook: hook}, store), nil,
		api.StrictHTTPServerOptions{
			RequestErrorHandlerFunc:  store.RequestErrorHandler,
			ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
		})
	h := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler})
	spec, err := api.OpenAPI()
	if err != nil {
		return nil, err
	}
	validate, err := idemvalidate.Middleware(spec, store.RequestErrorHandler)
	if err != nil {
		return nil, err
	}
	return validate(h), nil
}
