// Package idemotel reports the idempotency protocol's phases as OpenTelemetry spans.
//
//	store := idem.NewStore(pool, idem.WithTracer(idemotel.NewTracer(nil)))
//
// Spans (kind internal; names are [idem.Span]'s):
//
//	idem.request            one call of Store.Do (or Store.Reject), a child of the span
//	                        in its context (the HTTP server span, e.g. otelhttp's)
//	├─ idem.claim           the claim phase; its statements' spans (a pgx tracer's) nest
//	│                       under it
//	├─ idem.business        the business transaction; the business function runs under
//	│  │                    it, so the spans it starts nest under it
//	│  └─ idem.complete     the fenced completion and COMMIT
//	├─ idem.replay          a stored response replayed
//	└─ idem.reject          a 400/409/413/422 (or a scope function's problem) answered
//
// Attributes:
//
//	idem.operation             string  every span: the operation id (Policy.Operation)
//	idem.outcome               string  every span: what the phase came to (an idem.Outcome:
//	                                   claimed, replayed, in_progress, mismatch, completed,
//	                                   not_stored, lease_lost, failed, ...)
//	http.response.status_code  int     idem.request, idem.replay, idem.reject: the status
//	                                   of the call's answer
//	error.type                 string  a span that ended in an error: the error's type
//	                                   (semconv.ErrorType); an idem.request answered 5xx:
//	                                   the status code
//
// A span that ends in an error (a business error, a database error of the protocol, a
// commit whose outcome is unknown, a panic) records it (span.RecordError: an exception
// event with the error's text) and has status Error; so has an idem.request whose answer
// is a 5xx, as OpenTelemetry's HTTP server conventions have it. Rejections (4xx) are not
// errors. The idempotency key, the scope (often a tenant id) and the request and response
// bodies are never attributes: the protocol does not hand them to the tracer.
package idemotel

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/idem"
)

// ScopeName is the instrumentation scope (the tracer's name) of the spans.
const ScopeName = "github.com/idemgen/idemgen/idem/idemotel"

// Attribute keys of the spans.
const (
	OperationKey = attribute.Key("idem.operation")
	OutcomeKey   = attribute.Key("idem.outcome")
)

// NewTracer returns an idem.Tracer (for idem.WithTracer) that starts spans with a tracer
// named [ScopeName] from tp. A nil tp is otel.GetTracerProvider(): the global provider,
// including one set after NewTracer returns.
func NewTracer(tp trace.TracerProvider) idem.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tracer{tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))}
}

type tracer struct{ t trace.Tracer }

// Start implements idem.Tracer.
func (t tracer) Start(ctx context.Context, span idem.Span, operation string) (context.Context, idem.SpanEnd) {
	ctx, s := t.t.Start(ctx, string(span),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(OperationKey.String(operation)))
	return ctx, func(r idem.SpanResult) { end(s, r) }
}

// end sets the result's attributes and status on s and ends it.
func end(s trace.Span, r idem.SpanResult) {
	if s.IsRecording() {
		s.SetAttributes(OutcomeKey.String(string(r.Outcome)))
		if r.Status != 0 {
			s.SetAttributes(semconv.HTTPResponseStatusCode(r.Status))
		}
		switch {
		case r.Err != nil:
			s.RecordError(r.Err)
			s.SetAttributes(semconv.ErrorType(r.Err))
			s.SetStatus(codes.Error, r.Err.Error())
		case r.Status >= 500:
			s.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(r.Status)))
			s.SetStatus(codes.Error, "")
		}
	}
	s.End()
}
