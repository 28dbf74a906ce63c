// Package idemvalidate validates HTTP requests against the OpenAPI spec before they reach
// the generated handlers, and so before the idempotency protocol claims a key: a request
// the spec does not allow (a missing required field, a value under its minimum, a body
// with trailing data) is answered 400 and never stored or replayed.
//
// It is kin-openapi's openapi3filter behind net/http middleware:
//
//	spec, err := api.OpenAPI() // the spec idemgen embedded in the generated package (spec.gen.go)
//	validate, err := idemvalidate.Middleware(spec, store.RequestErrorHandler) // store is the *idem.Store
//	http.ListenAndServe(addr, validate(h))
package idemvalidate

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// ErrorHandler answers a request that failed validation. Pass the [idem.Store]'s
// RequestErrorHandler method: a 400 (413 when the body is over http.MaxBytesReader's
// limit) in the shape of the protocol's own rejections, [idem.WithRejectionRenderer]'s
// when the store has one. [idem.RequestErrorHandler] fits too, but always writes
// problem+json.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

// Middleware returns middleware that validates every request an operation of spec
// matches: its path, query, header and cookie parameters and its body (JSON, form,
// multipart, text; binary bodies by their declared format). A request that fails gets
// onError with an error naming the parameter or the body field and the rule
// ("request body: /quantity: number must be at least 1"). A JSON member whose name
// differs from a declared property only by case ("AMOUNT" beside "amount") is refused
// too, since the generated handler's encoding/json would decode it into that property
// unvalidated ("request body: /AMOUNT: member ... only by case"). The request body is
// read and put back for the handler, unchanged: defaults are not filled in.
//
// Routes are matched on the spec's paths alone: its servers (hosts, base paths) are
// ignored, as the generated router ignores them. A request no operation matches is passed
// on, for the router to answer 404 or 405. Security requirements are not checked:
// authentication is the service's. spec is not changed.
func Middleware(spec *openapi3.T, onError ErrorHandler) (func(http.Handler) http.Handler, error) {
	if onError == nil {
		return nil, errors.New("idemvalidate: no error handler")
	}
	anyHost := *spec
	anyHost.Servers = nil
	router, err := gorillamux.NewRouter(&anyHost)
	if err != nil {
		return nil, fmt.Errorf("idemvalidate: %w", err)
	}
	v := newValidator(spec, router)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := v.validate(r); err != nil {
				onError(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

// validator holds what Middleware prepares once: the router, openapi3filter's options
// (with and without the body) and, per operation, the copy openapi3filter is given.
type validator struct {
	router routers.Router
	// literal is router's answer for each operation under a path without templates,
	// found once (literalRoutes).
	literal map[routeKey]*routers.Route
	// opts validates a whole request; noBody its parameters only, when the body is
	// validated from the one decoded value (body.go).
	opts, noBody *openapi3filter.Options
	// bodyOpts are the schema options openapi3filter.ValidateRequestBody would pass.
	bodyOpts, bodyOpts31 []openapi3.SchemaValidationOption
	// ops maps each operation of the spec to a shallow copy without security
	// requirements (they are not checked: authentication is the service's), so that
	// openapi3filter does not call the no-op authentication for each.
	ops map[*openapi3.Operation]*openapi3.Operation
}

func newValidator(spec *openapi3.T, router routers.Router) *validator {
	opts := &openapi3filter.Options{
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults: true,
		// ECMA-262 patterns, as OpenAPI defines them (pattern.go), and the schema errors'
		// wording. The customizer is built once here: Options.WithCustomSchemaErrorFunc
		// would have openapi3filter build it again for every parameter of every request.
		SchemaValidationOptions: append([]openapi3.SchemaValidationOption{
			openapi3.SetSchemaErrorMessageCustomizer(schemaError),
		}, patternOptions...),
	}
	noBody := *opts
	noBody.ExcludeRequestBody = true
	v := &validator{router: router, opts: opts, noBody: &noBody, ops: map[*openapi3.Operation]*openapi3.Operation{}}
	v.bodyOpts = append([]openapi3.SchemaValidationOption{openapi3.VisitAsRequest()}, opts.SchemaValidationOptions...)
	v.bodyOpts31 = append(slices.Clip(v.bodyOpts), openapi3.EnableJSONSchema2020())
	noSecurity := openapi3.SecurityRequirements{}
	if spec.Paths != nil {
		for _, item := range spec.Paths.Map() {
			for _, op := range item.Operations() {
				c := *op
				c.Security = &noSecurity
				v.ops[op] = &c
			}
		}
	}
	v.literal = literalRoutes(spec, router, v.ops)
	return v
}

func (v *validator) validate(r *http.Request) error {
	route, params, err := v.findRoute(r)
	if err != nil {
		return nil // no operation: the router answers
	}
	body, err := readJSONBody(r, route)
	if err != nil {
		return err
	}
	opts := v.opts
	if body.value != nil {
		opts = v.noBody
	}
	input := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	// The context reaches only the authentication function, which is a no-op here.
	err = openapi3filter.ValidateRequest(r.Context(), input)
	if err == nil && body.value != nil {
		err = v.validateBody(input, body)
	}
	if err == nil {
		return nil
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return mb // 413, not a validation failure
	}
	return &Error{Detail: detail(err), Err: err}
}

// Error is a request that does not match the spec. Detail is short and does not quote
// the request's values; Err is openapi3filter's error.
type Error struct {
	Detail string
	Err    error
}

func (e *Error) Error() string { return "request does not match the spec: " + e.Detail }
func (e *Error) Unwrap() error { return e.Err }

// detail names what failed without openapi3filter's schema and value dumps.
func detail(err error) string {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return err.Error()
	}
	reason := re.Reason
	if re.Err != nil {
		var se *openapi3.SchemaError
		if errors.As(re.Err, &se) {
			reason = schemaError(se)
		} else if reason == "" || reason == re.Err.Error() {
			reason = re.Err.Error()
		} else {
			reason += ": " + re.Err.Error()
		}
	}
	switch {
	case re.Parameter != nil:
		return fmt.Sprintf("%s parameter %q: %s", re.Parameter.In, re.Parameter.Name, reason)
	case re.RequestBody != nil:
		return "request body: " + reason
	}
	return reason
}

func schemaError(se *openapi3.SchemaError) string {
	if p := se.JSONPointer(); len(p) > 0 {
		return "/" + strings.Join(p, "/") + ": " + se.Reason
	}
	return se.Reason
}
