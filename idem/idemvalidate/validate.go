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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
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
	opts := &openapi3filter.Options{
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults: true,
		// ECMA-262 patterns, as OpenAPI defines them: pattern.go.
		SchemaValidationOptions: patternOptions,
	}
	opts.WithCustomSchemaErrorFunc(schemaError)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := validate(r, router, opts); err != nil {
				onError(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

func validate(r *http.Request, router routers.Router, opts *openapi3filter.Options) error {
	route, params, err := router.FindRoute(r)
	if err != nil {
		return nil // no operation: the router answers
	}
	if err := oneJSONValue(r); err != nil {
		return err
	}
	if err := bodyCaseVariant(r, route); err != nil {
		return err
	}
	input := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	err = openapi3filter.ValidateRequest(context.WithoutCancel(r.Context()), input)
	if err == nil {
		return nil
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return mb // 413, not a validation failure
	}
	return &Error{Detail: detail(err), Err: err}
}

// oneJSONValue refuses a JSON body that is not exactly one JSON value: openapi3filter and
// the generated decoder both read the first value and ignore what follows
// (`{"n":1}garbage`). The body is put back for them.
func oneJSONValue(r *http.Request) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Body == nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	data, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(data))
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		return mb
	case err != nil:
		return &Error{Detail: "request body: " + err.Error(), Err: err}
	case len(bytes.TrimSpace(data)) == 0:
		return nil // no body: openapi3filter knows whether one is required
	}
	var v json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return &Error{Detail: "request body: " + err.Error(), Err: err}
	}
	return nil
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
