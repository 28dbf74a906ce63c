package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	ext "github.com/idemgen/idemgen/gen/testdata/golden/chiexternal"
	api "github.com/idemgen/idemgen/gen/testdata/golden/chirouter"
	"github.com/idemgen/idemgen/idem"
)

func TestChi(t *testing.T) {
	testRouters(t,
		routerCase{"idemgen base", api.OpenAPI, func(store *idem.Store, o *orders, mw ...func(http.Handler) http.Handler) http.Handler {
			return chiServer(store, api.NewIdempotentStrictServer(chiOrders{o}, store), mw...)
		}},
		routerCase{"external base", ext.OpenAPI, func(store *idem.Store, o *orders, mw ...func(http.Handler) http.Handler) http.Handler {
			return chiExternalServer(store, ext.NewIdempotentStrictServer(chiExternalOrders{o}, store), mw...)
		}},
	)
}

// chiServer serves the generated API with chi: net/http middleware (idemvalidate's, the
// service's authentication) goes on the router, before the routes. store's
// RequestErrorHandler answers what the server cannot decode in the shape of the
// protocol's own rejections.
func chiServer(store *idem.Store, server api.StrictServerInterface, middleware ...func(http.Handler) http.Handler) http.Handler {
	strict := api.NewStrictHandlerWithOptions(server, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc:  store.RequestErrorHandler, // 400 (413 over the body limit)
		ResponseErrorHandlerFunc: idem.ResponseErrorHandler, // 500 problem; logs the error with slog
	})
	r := chi.NewRouter()
	r.Use(middleware...)
	return api.HandlerWithOptions(strict, api.ChiServerOptions{BaseRouter: r, ErrorHandlerFunc: store.RequestErrorHandler})
}

// chiExternalServer is chiServer for oapi-codegen's own chi output.
func chiExternalServer(store *idem.Store, server ext.StrictServerInterface, middleware ...func(http.Handler) http.Handler) http.Handler {
	strict := ext.NewStrictHandlerWithOptions(server, nil, ext.StrictHTTPServerOptions{
		RequestErrorHandlerFunc:  store.RequestErrorHandler,
		ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	r := chi.NewRouter()
	r.Use(middleware...)
	return ext.HandlerWithOptions(strict, ext.ChiServerOptions{BaseRouter: r, ErrorHandlerFunc: store.RequestErrorHandler})
}

type chiOrders struct{ *orders }

func (o chiOrders) CreateOrder(ctx context.Context, tx idem.Tx, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	id, err := o.create(ctx, tx, req.Account, req.Body.Item, req.Body.Quantity)
	return api.CreateOrder201JSONResponse{Id: id, Account: req.Account, Item: req.Body.Item, Quantity: req.Body.Quantity}, err
}

func (o chiOrders) GetOrder(ctx context.Context, req api.GetOrderRequestObject) (api.GetOrderResponseObject, error) {
	return api.GetOrder404Response{}, o.get(req.Id)
}

type chiExternalOrders struct{ *orders }

func (o chiExternalOrders) CreateOrder(ctx context.Context, tx idem.Tx, req ext.CreateOrderRequestObject) (ext.CreateOrderResponseObject, error) {
	id, err := o.create(ctx, tx, req.Account, req.Body.Item, req.Body.Quantity)
	return ext.CreateOrder201JSONResponse{Id: id, Account: req.Account, Item: req.Body.Item, Quantity: req.Body.Quantity}, err
}

func (o chiExternalOrders) GetOrder(ctx context.Context, req ext.GetOrderRequestObject) (ext.GetOrderResponseObject, error) {
	return ext.GetOrder404Response{}, o.get(req.Id)
}
