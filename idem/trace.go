package idem

import (
	"context"
	"errors"
)

// Span names a phase of the protocol that a [Tracer] sees as a span. The values are the
// span names (idem/idemotel uses them as they are).
//
//	idem.request            one call of Store.Do (or of Store.Reject), parent of the others
//	├─ idem.claim           BEGIN and the key's lock with its row (one flight): the claim, or
//	│                       the read that decides the answer (one per attempt)
//	├─ idem.business        the business function (which runs under this span's context)
//	│  │                    and the completion, in the claim's transaction
//	│  └─ idem.complete     the key's row born completed and COMMIT (one flight)
//	├─ idem.replay          a stored response replayed (ends as it starts)
//	└─ idem.reject          a 400/409/413/422 (or a ScopeFunc's problem) answered (ends as it starts)
//
// A request without a key under a policy that allows one has idem.request > idem.business
// (outcome unkeyed) and no claim.
type Span string

const (
	SpanRequest  Span = "idem.request"
	SpanClaim    Span = "idem.claim"
	SpanBusiness Span = "idem.business"
	SpanComplete Span = "idem.complete"
	SpanReplay   Span = "idem.replay"
	SpanReject   Span = "idem.reject"
)

// SpanResult is what a span's phase came to.
type SpanResult struct {
	// Outcome is the phase's outcome: for idem.claim claimed or taken_over (the call holds
	// the claim), or the answer it decided (replayed, in_progress, mismatch); for
	// idem.business and idem.complete completed, not_stored, or the answer from another
	// writer's row (replayed, mismatch); for
	// idem.request, idem.replay and idem.reject the call's [Response.Outcome]. A phase
	// that ends in an error has [OutcomeFailed] (or [OutcomeRetried] for an
	// idem.complete hitting a serialization failure or deadlock that the business
	// transaction retries).
	Outcome Outcome
	// Status is the HTTP status of the call's answer, on idem.request, idem.replay and
	// idem.reject; 0 on the other spans and when the call ends in an error.
	Status int
	// Err is the phase's error, if any: a business function's error, a database error of
	// the protocol, or one wrapping [ErrCommitUnknown]. A call that does not return
	// (a panic in the business function, runtime.Goexit) ends its spans with
	// [ErrNoReturn].
	Err error
}

// ErrNoReturn is the [SpanResult.Err] of spans ended while their call was leaving by a
// panic or runtime.Goexit: spans end whatever happens, and the panic goes on.
var ErrNoReturn = errors.New("idem: the call did not return (panic or runtime.Goexit)")

// SpanEnd ends the span that [Tracer.Start] began. It is called exactly once.
type SpanEnd func(SpanResult)

// Tracer receives the protocol's spans (see [Span]); idem/idemotel adapts OpenTelemetry.
// Start begins span for operation (the [Policy.Operation]) as a child of the span in ctx,
// and returns the context the phase runs under and the function that ends the span. It
// must be safe for concurrent use. The protocol never hands a tracer the idempotency key,
// the scope or the request or response body.
type Tracer interface {
	Start(ctx context.Context, span Span, operation string) (context.Context, SpanEnd)
}

// WithTracer sets the tracer of the protocol's spans. Default: none, at no cost (no
// allocation per call).
func WithTracer(t Tracer) Option { return func(s *Store) { s.tracer = t } }

// noSpanEnd is the SpanEnd of a store without a tracer.
func noSpanEnd(SpanResult) {}

// trace starts span for operation when the store has a tracer.
func (s *Store) trace(ctx context.Context, span Span, operation string) (context.Context, SpanEnd) {
	if s.tracer == nil {
		return ctx, noSpanEnd
	}
	return s.tracer.Start(ctx, span, operation)
}

// traceRequest starts the idem.request span of a call. The returned function ends it
// with the call's results (pointers to Do's named results, read when it runs deferred),
// after an idem.replay or idem.reject span when the answer is one.
func (s *Store) traceRequest(ctx context.Context, p *Policy) (context.Context, func(*Response, error)) {
	if s.tracer == nil {
		return ctx, noRequestEnd
	}
	ctx, end := s.tracer.Start(ctx, SpanRequest, p.Operation)
	return ctx, func(resp *Response, err error) {
		r := answered(resp, err)
		if span := answerSpan(r.Outcome); span != "" {
			_, endAnswer := s.tracer.Start(ctx, span, p.Operation)
			endAnswer(r)
		}
		end(r)
	}
}

func noRequestEnd(*Response, error) {}

// answered is the result of a phase that answers with resp or fails with err.
func answered(resp *Response, err error) SpanResult {
	switch {
	case err != nil:
		return SpanResult{Outcome: OutcomeFailed, Err: err}
	case resp == nil:
		return SpanResult{Outcome: OutcomeFailed, Err: ErrNoReturn}
	}
	return SpanResult{Outcome: resp.Outcome, Status: resp.Status}
}

// claimed is the idem.claim result of call.claim's results: how the claim was won, or
// the answer.
func claimSpan(state claimState, resp *Response, err error) SpanResult {
	if err == nil {
		switch state {
		case claimFresh:
			return SpanResult{Outcome: OutcomeClaimed}
		case claimTakeover:
			return SpanResult{Outcome: OutcomeTakenOver}
		case claimBusy:
			return SpanResult{Outcome: OutcomeInProgress}
		}
	}
	r := answered(resp, err)
	r.Status = 0
	return r
}

// finished is the result of the business transaction or of its completion: the
// response's outcome, a retry, or a failure.
func finished(resp *Response, retry bool, err error) SpanResult {
	if retry {
		return SpanResult{Outcome: OutcomeRetried, Err: err}
	}
	r := answered(resp, err)
	r.Status = 0
	return r
}

// answerSpan is the span an answer of outcome o gets besides idem.request: idem.replay,
// idem.reject, or none ("").
func answerSpan(o Outcome) Span {
	switch o {
	case OutcomeReplayed:
		return SpanReplay
	case OutcomeInProgress, OutcomeMismatch, OutcomeMissingKey, OutcomeInvalidKey, OutcomeLeaseLost, OutcomeRejected:
		return SpanReject
	}
	return ""
}
