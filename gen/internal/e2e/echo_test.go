package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	ext "github.com/idemgen/idemgen/gen/testdata/golden/echoexternal"
	api "github.com/idemgen/idemgen/gen/testdata/golden/echorouter"
	"github.com/idemgen/idemgen/idem"
)

func TestEcho(t *testing.T) {
	testRouters(t,
		routerCase{"idemgen base", api.OpenAPI, func(store *idem.Store, o *orders, mw ...func(http.Handler) http.Handler) http.Handler {
			return echoServer(store, api.NewIdempotentStrictServer(echoOrders{o}, store), mw...)
		}},
		routerCase{"external base", ext.OpenAPI, func(store *idem.Store, o *orders, mw ...func(http.Handler) http.Handler) http.Handler {
			return echoExternalServer(store, ext.NewIdempotentStrictServer(echoExternalOrders{o}, store), mw...)
		}},
	)
}

// echoServer serves the generated API with echo: net/http middleware (idemvalidate's, the
// service's authentication) is wrapped with echo.WrapMiddleware, and echoProblems answers
// the errors.
func echoServer(store *idem.Store, server api.StrictServerInterface, middleware ...func(http.Handler) http.Handler) http.Handler {
	e := echo.New()
	e.HTTPErrorHandler = echoProblems(store)
	for _, m := range middleware {
		e.Use(echo.WrapMiddleware(m))
	}
	api.RegisterHandlers(e, api.NewStrictHandler(server, nil))
	return e
}

// echoProblems returns echo's error handler: a parameter or body echo could not bind (its
// 400) goes to store.RequestErrorHandler, which answers in the shape of the protocol's own
// rejections (413 when the cause is an *http.MaxBytesError); echo's other errors (404,
// 405) are RFC 9457 problems with their status and message; any other error (the
// business's, the database's) goes to idem.ResponseErrorHandler: 500, logged, not leaked.
func echoProblems(store *idem.Store) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		var he *echo.HTTPError
		switch {
		case c.Response().Committed:
		case errors.As(err, &he) && he.Code == http.StatusBadRequest:
			cause := he.Internal // the decoder's error, if any
			if cause == nil {
				cause = fmt.Errorf("%v", he.Message)
			}
			store.RequestErrorHandler(c.Response(), c.Request(), cause)
		case errors.As(err, &he) && he.Code < 500:
			idem.WriteProblem(c.Response(), he.Code, fmt.Sprint(he.Message))
		default:
			idem.ResponseErrorHandler(c.Response(), c.Request(), err)
		}
	}
}

// echoExternalServer is echoServer for oapi-codegen's own echo output.
func echoExternalServer(store *idem.Store, server ext.StrictServerInterface, middleware ...func(http.Handler) http.Handler) http.Handler {
	e := echo.New()
	e.HTTPErrorHandler = echoProblems(store)
	for _, m := range middleware {
		e.Use(echo.WrapMiddleware(m))
	}
	ext.RegisterHandlers(e, ext.NewStrictHandler(server, nil))
	return e
}

type echoOrders struct{ *orders }

func (o echoOrders) CreateOrder(ctx context.Context, tx idem.Tx, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	id, err := o.create(ctx, tx, req.Account, req.Body.Item, req.Body.Quantity)
	return api.CreateOrder201JSONResponse{Id: id, Account: req.Account, Item: req.Body.Item, Quantity: req.Body.Quantity}, err
}

func (o echoOrders) GetOrder(ctx context.Context, req api.GetOrderRequestObject) (api.GetOrderResponseObject, error) {
	return api.GetOrder404Response{}, o.get(req.Id)
}

type echoExternalOrders struct{ *orders }

func (o echoExternalOrders) CreateOrder(ctx context.Context, tx idem.Tx, req ext.CreateOrderRequestObject) (ext.CreateOrderResponseObject, error) {
	id, err := o.create(ctx, tx, req.Account, req.Body.Item, req.Body.Quantity)
	return ext.CreateOrder201JSONResponse{Id: id, Account: req.Account, Item: req.Body.Item, Quantity: req.Body.Quantity}, err
}

func (o echoExternalOrders) GetOrder(ctx context.Context, req ext.GetOrderRequestObject) (ext.GetOrderResponseObject, error) {
	return ext.GetOrder404Response{}, o.get(req.Id)
}
