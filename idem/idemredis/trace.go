package idemredis

import (
	"context"

	"github.com/idemgen/idemgen/idem"
)

// The spans are the PostgreSQL store's (see idem.Span), with the same parents and
// results: idem.request > idem.claim, idem.business > idem.complete, idem.replay,
// idem.reject. idem.business is the business function and the completion; nothing is
// rolled back.

func noSpanEnd(idem.SpanResult) {}

func (s *Store) trace(ctx context.Context, span idem.Span, operation string) (context.Context, idem.SpanEnd) {
	if s.tracer == nil {
		return ctx, noSpanEnd
	}
	return s.tracer.Start(ctx, span, operation)
}

func noRequestEnd(*idem.Response, error) {}

// traceRequest starts the idem.request span; the returned function ends it (after an
// idem.replay or idem.reject span when the answer is one).
func (s *Store) traceRequest(ctx context.Context, p *idem.Policy) (context.Context, func(*idem.Response, error)) {
	if s.tracer == nil {
		return ctx, noRequestEnd
	}
	ctx, end := s.tracer.Start(ctx, idem.SpanRequest, p.Operation)
	return ctx, func(resp *idem.Response, err error) {
		r := answered(resp, err)
		if span := answerSpan(r.Outcome); span != "" {
			_, endAnswer := s.tracer.Start(ctx, span, p.Operation)
			endAnswer(r)
		}
		end(r)
	}
}

func answered(resp *idem.Response, err error) idem.SpanResult {
	switch {
	case err != nil:
		return idem.SpanResult{Outcome: idem.OutcomeFailed, Err: err}
	case resp == nil:
		return idem.SpanResult{Outcome: idem.OutcomeFailed, Err: idem.ErrNoReturn}
	}
	return idem.SpanResult{Outcome: resp.Outcome, Status: resp.Status}
}

// phase is the result of a phase that does not answer itself (no status).
func phase(resp *idem.Response, err error) idem.SpanResult {
	r := answered(resp, err)
	r.Status = 0
	return r
}

func answerSpan(o idem.Outcome) idem.Span {
	switch o {
	case idem.OutcomeReplayed:
		return idem.SpanReplay
	case idem.OutcomeInProgress, idem.OutcomeMismatch, idem.OutcomeMissingKey, idem.OutcomeInvalidKey,
		idem.OutcomeRejected, OutcomeUnavailable:
		return idem.SpanReject
	}
	return ""
}
