package idemvalidate

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
)

// routeKey is a request's method and escaped path (url.URL.EscapedPath).
type routeKey struct{ method, path string }

// literalRoutes asks router, once, for the route of each operation under a path of spec
// without templates ("/payments") and keeps its answer by method and escaped path: with
// no servers to match (Middleware drops the document's, and there are none when a path
// item declares its own), gorillamux's answer depends on those two alone (it matches the
// escaped path; the method picks the operation), so a request with the same two gets the
// same route without FindRoute's 4 allocations. The routes carry ops' copies and are
// shared by the requests: not to be changed. nil when a path item declares servers.
func literalRoutes(spec *openapi3.T, router routers.Router, ops map[*openapi3.Operation]*openapi3.Operation) map[routeKey]*routers.Route {
	if spec.Paths == nil {
		return nil
	}
	for _, item := range spec.Paths.Map() {
		if len(item.Servers) > 0 {
			return nil
		}
	}
	literal := map[routeKey]*routers.Route{}
	for path, item := range spec.Paths.Map() {
		if strings.Contains(path, "{") {
			continue
		}
		for method := range item.Operations() {
			r := &http.Request{Method: method, URL: &url.URL{Path: path}}
			route, params, err := router.FindRoute(r)
			if err != nil || len(params) != 0 {
				continue
			}
			if op := ops[route.Operation]; op != nil {
				route.Operation = op // route is FindRoute's own copy
			}
			literal[routeKey{method, r.URL.EscapedPath()}] = route
		}
	}
	return literal
}

// findRoute is router.FindRoute's answer for r, from literal when r's method and escaped
// path are there. The route's operation is ops' copy.
func (v *validator) findRoute(r *http.Request) (*routers.Route, map[string]string, error) {
	if route := v.literal[routeKey{r.Method, r.URL.EscapedPath()}]; route != nil {
		return route, nil, nil
	}
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		return nil, nil, err
	}
	if op := v.ops[route.Operation]; op != nil {
		route.Operation = op // route is FindRoute's own copy
	}
	return route, params, nil
}
