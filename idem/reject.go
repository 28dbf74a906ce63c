package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// RejectionRenderer renders the body of a protocol rejection: the 400 (missing or invalid
// key), 409 (in progress, lease lost), 413 (body over the limit), 422 (key reused) and
// a [ScopeFunc]'s problems. It returns the Content-Type and the bytes. The default writes
// p as RFC 9457 application/problem+json; a service whose spec declares its own error
// shape for these statuses renders p in it (see [WithRejectionRenderer]). Retry-After is
// set by the protocol either way.
type RejectionRenderer func(p Problem) (contentType string, body []byte)

// WithRejectionRenderer renders every rejection of the store's marked operations with
// f, in one place: e.g. `{"error": p.Detail}` as application/json for a spec that
// declares that shape for its 409 and 422.
func WithRejectionRenderer(f RejectionRenderer) Option { return func(s *Store) { s.render = f } }

// WithMaxBodyBytes sets the most bytes of a streamed request body (multipart, raw) the
// protocol reads into memory to fingerprint it; a larger body is answered 413 before any
// SQL. Default [DefaultMaxBodyBytes]. JSON, form and text bodies are decoded by the
// server before the protocol runs: bound those with http.MaxBytesHandler.
func WithMaxBodyBytes(n int64) Option { return func(s *Store) { s.maxBody = n } }

// renderProblemJSON is the default RejectionRenderer.
func renderProblemJSON(p Problem) (string, []byte) {
	body, _ := json.Marshal(p) // a struct of strings and an int always encodes
	return "application/problem+json", append(body, '\n')
}

// problem renders p with the store's renderer. retryAfter, when > 0, is sent as
// Retry-After in whole seconds.
func (s *Store) problem(o Outcome, p Problem, retryAfter int) *Response {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	ct, body := s.render(p)
	lines := []HeaderLine{{Name: "Content-Type", Value: ct}}
	if retryAfter > 0 {
		lines = append(lines, HeaderLine{Name: "Retry-After", Value: strconv.Itoa(retryAfter)})
	}
	return &Response{Status: p.Status, Header: lines, Body: body, Outcome: o}
}

// Reject answers a request of operation p that the generated handler refuses before
// [Store.Do]: err wrapping [ErrInvalidKey] (a body key that is not a string) is a 400,
// [ErrBodyTooLarge] a 413, a *[Problem] itself; anything else a 400 with err's text. The
// response is rendered like the protocol's own rejections. With a tracer ([WithTracer])
// the call has the spans of a rejection by Do: idem.request, a child of the span in ctx,
// with idem.reject under it, both carrying the response's outcome and status.
func (s *Store) Reject(ctx context.Context, p *Policy, err error) *Response {
	_, endSpan := s.traceRequest(ctx, p)
	resp := s.rejection(p, err)
	endSpan(resp, nil)
	return resp
}

// rejection is Reject's response, without spans (Do's own rejections are in its span).
func (s *Store) rejection(p *Policy, err error) *Response {
	var pr *Problem
	detail := strings.TrimPrefix(err.Error(), "idem: ")
	switch {
	case errors.As(err, &pr):
		s.observe(p.Operation, OutcomeRejected)
		return s.problem(OutcomeRejected, *pr, 0)
	case errors.Is(err, ErrInvalidKey):
		return s.reject(p, OutcomeInvalidKey, http.StatusBadRequest, detail, 0)
	case errors.Is(err, ErrBodyTooLarge):
		return s.reject(p, OutcomeRejected, http.StatusRequestEntityTooLarge, detail, 0)
	}
	return s.reject(p, OutcomeRejected, http.StatusBadRequest, detail, 0)
}

// bufferBodies reads the streamed bodies among parts into memory (at most the store's
// body limit in all), so that they can be fingerprinted and read again. A body over
// the limit is a 413 rejection, one that cannot be read a 400.
func (s *Store) bufferBodies(p *Policy, parts []Part) *Response {
	for _, part := range parts {
		b, ok := part.Value.(bufferer)
		if !ok {
			continue
		}
		if err := b.buffer(s.maxBody); err != nil {
			return s.rejection(p, err)
		}
	}
	return nil
}

// StringKey returns the text of a key header that the package's own oapi-codegen output
// types as something other than a string (format: uuid, whose text is the canonical
// lowercase form [KeySchema.Canonical] gives too): nil when v is nil. The code idemgen
// generates with -base=external uses it.
func StringKey[T fmt.Stringer](v *T) *string {
	if v == nil {
		return nil
	}
	k := (*v).String()
	return &k
}

// RequestErrorHandler is [RequestErrorHandler] rendered with the store's
// [RejectionRenderer]: a request the server could not decode or that failed validation
// gets 400 (413 over the body limit) in the same shape as the protocol's rejections. Its
// signature fits oapi-codegen's error handler options and idemvalidate.Middleware.
func (s *Store) RequestErrorHandler(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadRequest
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || errors.Is(err, ErrBodyTooLarge) {
		status = http.StatusRequestEntityTooLarge
	}
	_ = s.problem(OutcomeRejected, Problem{Status: status, Detail: strings.TrimPrefix(err.Error(), "idem: ")}, 0).WriteTo(w)
}
