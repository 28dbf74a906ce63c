package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	ext "github.com/idemgen/idemgen/gen/testdata/golden/ginexternal"
	api "github.com/idemgen/idemgen/gen/testdata/golden/ginrouter"
	"github.com/idemgen/idemgen/idem"
)

func TestGin(t *testing.T) {
	gin.SetMode(gin.ReleaseMode) // no route listing on stdout
	testRouters(t,
		routerCase{"idemgen base", api.OpenAPI, func(store *idem.Store, o *orders, mw ...func(http.Handler) http.Handler) http.Handler {
			return ginServer(store, api.NewIdempotentStrictServer(ginOrders{o}, store), mw...)
		}},
		routerCase{"external base", ext.OpenAPI, func(store *idem.Store, o *orders, mw ...func(http.Handler) http.Handler) http.Handler {
			return ginExternalServer(store, ext.NewIdempotentStrictServer(ginExternalOrders{o}, store), mw...)
		}},
	)
}

// ginServer serves the generated API with gin: net/http middleware (idemvalidate's, the
// service's authentication) is adapted with ginMiddleware; store's RequestErrorHandler
// answers what the server cannot decode in the shape of the protocol's own rejections,
// and idem.ResponseErrorHandler the business's errors. gin hands its *gin.Context to the
// strict server as the request's context: with ContextWithFallback its values (the scope)
// and cancellation are the request's.
func ginServer(store *idem.Store, server api.StrictServerInterface, middleware ...func(http.Handler) http.Handler) http.Handler {
	request := func(c *gin.Context, err error) { store.RequestErrorHandler(c.Writer, c.Request, err) }
	response := func(c *gin.Context, err error) { idem.ResponseErrorHandler(c.Writer, c.Request, err) }
	strict := api.NewStrictHandlerWithOptions(server, nil, api.StrictGinServerOptions{
		RequestErrorHandlerFunc: request, HandlerErrorFunc: response, ResponseErrorHandlerFunc: response,
	})
	r := gin.New()
	r.ContextWithFallback = true
	for _, m := range middleware {
		r.Use(ginMiddleware(m))
	}
	api.RegisterHandlersWithOptions(r, strict, api.GinServerOptions{
		ErrorHandler: func(c *gin.Context, err error, status int) { request(c, err) }, // a bad parameter: 400
	})
	return r
}

// ginMiddleware runs net/http middleware m in gin: the request m passes on (with its
// context) goes down the chain; one m answers itself stops there. A ResponseWriter m
// wraps is not passed on (validation and authentication need not wrap it).
func ginMiddleware(m func(http.Handler) http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		passed := false
		m(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			passed = true
			c.Request = r
			c.Next()
		})).ServeHTTP(c.Writer, c.Request)
		if !passed {
			c.Abort()
		}
	}
}

// ginExternalServer is ginServer for oapi-codegen's own gin output.
func ginExternalServer(store *idem.Store, server ext.StrictServerInterface, middleware ...func(http.Handler) http.Handler) http.Handler {
	request := func(c *gin.Context, err error) { store.RequestErrorHandler(c.Writer, c.Request, err) }
	response := func(c *gin.Context, err error) { idem.ResponseErrorHandler(c.Writer, c.Request, err) }
	strict := ext.NewStrictHandlerWithOptions(server, nil, ext.StrictGinServerOptions{
		RequestErrorHandlerFunc: request, HandlerErrorFunc: response, ResponseErrorHandlerFunc: response,
	})
	r := gin.New()
	r.ContextWithFallback = true
	for _, m := range middleware {
		r.Use(ginMiddleware(m))
	}
	ext.RegisterHandlersWithOptions(r, strict, ext.GinServerOptions{
		ErrorHandler: func(c *gin.Context, err error, status int) { request(c, err) }, // a bad parameter: 400
	})
	return r
}

type ginOrders struct{ *orders }

func (o ginOrders) CreateOrder(ctx context.Context, tx idem.Tx, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	id, err := o.create(ctx, tx, req.Account, req.Body.Item, req.Body.Quantity)
	return api.CreateOrder201JSONResponse{Id: id, Account: req.Account, Item: req.Body.Item, Quantity: req.Body.Quantity}, err
}

func (o ginOrders) GetOrder(ctx context.Context, req api.GetOrderRequestObject) (api.GetOrderResponseObject, error) {
	return api.GetOrder404Response{}, o.get(req.Id)
}

type ginExternalOrders struct{ *orders }

func (o ginExternalOrders) CreateOrder(ctx context.Context, tx idem.Tx, req ext.CreateOrderRequestObject) (ext.CreateOrderResponseObject, error) {
	id, err := o.create(ctx, tx, req.Account, req.Body.Item, req.Body.Quantity)
	return ext.CreateOrder201JSONResponse{Id: id, Account: req.Account, Item: req.Body.Item, Quantity: req.Body.Quantity}, err
}

func (o ginExternalOrders) GetOrder(ctx context.Context, req ext.GetOrderRequestObject) (ext.GetOrderResponseObject, error) {
	return ext.GetOrder404Response{}, o.get(req.Id)
}
