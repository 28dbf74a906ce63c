package idemvalidate

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

const routeSpec = `openapi: "3.0.3"
info: {title: t, version: "1"}
paths:
  /payments:
    get: {operationId: list, responses: {"200": {description: ok}}}
    post: {operationId: create, responses: {"201": {description: ok}}}
  /payments/new:
    post: {operationId: createNew, responses: {"201": {description: ok}}}
  /payments/{id}:
    get: {operationId: get, responses: {"200": {description: ok}}}
  /a b/c%d:
    post: {operationId: odd, responses: {"201": {description: ok}}}
  /orders:batch:
    post: {operationId: batch, responses: {"201": {description: ok}}}
`

// findRoute answers every request as gorillamux's FindRoute does (the same route or the
// same error, the same path parameters), for paths with and without templates, escaped
// spellings of a literal path, another method, a trailing slash.
func TestFindRouteAnswersAsFindRoute(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromData([]byte(routeSpec))
	if err != nil {
		t.Fatal(err)
	}
	router, err := gorillamux.NewRouter(spec)
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(spec, router)
	// Not "/a b/c%d": gorillamux matches the escaped path against the template as
	// written, and FindRoute finds no route for it.
	if len(v.literal) != 4 {
		t.Fatalf("%d literal routes, want 4 (GET and POST /payments, POST /payments/new, POST /orders:batch)", len(v.literal))
	}
	for _, target := range []string{
		"/payments", "/payments/", "/payments/new", "/payments/x", "/pay%6Dents", "/payments%2Fnew",
		"/a%20b/c%25d", "/a b/c%d", "/a%20b/c%d", "/orders:batch", "/orders%3Abatch", "/orders%3abatch",
		"/PAYMENTS", "/nowhere",
	} {
		for _, method := range []string{"GET", "POST", "PUT", "HEAD", "post"} {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Method = method
			r.URL.Path, r.URL.RawPath = target, ""
			if u, err := r.URL.Parse(target); err == nil && target != "/a b/c%d" {
				r.URL = u
			}
			want, wantParams, wantErr := router.FindRoute(r)
			got, gotParams, gotErr := v.findRoute(r)
			switch {
			case (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()):
				t.Errorf("%s %s: error %v, FindRoute's %v", method, target, gotErr, wantErr)
			case wantErr != nil:
			case got.Path != want.Path || got.Method != want.Method || got.Operation.OperationID != want.Operation.OperationID ||
				got.PathItem != want.PathItem || got.Spec != want.Spec || got.Server != want.Server:
				t.Errorf("%s %s: route %s %s (%s), FindRoute's %s %s (%s)", method, target,
					got.Method, got.Path, got.Operation.OperationID, want.Method, want.Path, want.Operation.OperationID)
			case len(gotParams) != len(wantParams) || !maps.Equal(gotParams, wantParams):
				t.Errorf("%s %s: parameters %v, FindRoute's %v", method, target, gotParams, wantParams)
			case got.Operation.Security == nil || len(*got.Operation.Security) != 0:
				t.Errorf("%s %s: the operation keeps its security requirements", method, target)
			}
		}
	}
}

// A path item with servers of its own: its routes match hosts too, so none is looked up
// by method and path alone.
func TestNoLiteralRoutesWithPathServers(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromData([]byte(routeSpec + `    servers: [{url: "https://other.example.com/v2"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	router, err := gorillamux.NewRouter(spec)
	if err != nil {
		t.Fatal(err)
	}
	if v := newValidator(spec, router); v.literal != nil {
		t.Fatalf("literal routes %v with a path item's servers", v.literal)
	}
}
