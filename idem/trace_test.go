package idem

import (
	"context"
	"fmt"
	"testing"
)

// The hooks of a store without a tracer allocate nothing: the pattern of Do, run,
// execute and attempt (BenchmarkBusinessTx shows the same on the whole call).
func TestNoTracerAllocatesNothing(t *testing.T) {
	s, p := &Store{}, &Policy{Operation: "createThing"}
	call := func(ctx context.Context) (resp *Response, err error) {
		ctx, endRequest := s.traceRequest(ctx, p)
		defer func() { endRequest(resp, err) }()
		cctx, endClaim := s.trace(ctx, SpanClaim, p.Operation)
		endClaim(claimSpan(claimFresh, nil, nil))
		_ = cctx
		ctx, endBusiness := s.trace(ctx, SpanBusiness, p.Operation)
		defer func() { endBusiness(finished(resp, false, err)) }()
		_, endComplete := s.trace(ctx, SpanComplete, p.Operation)
		resp = &Response{Status: 201, Outcome: OutcomeCompleted}
		endComplete(finished(resp, false, nil))
		return resp, nil
	}
	ctx := context.Background()
	resp := &Response{}
	if n := testing.AllocsPerRun(100, func() { r, _ := call(ctx); *resp = *r }); n > 1 {
		t.Errorf("%v allocations per call without a tracer, want 1 (the response)", n)
	}
}

// Store.Reject without a tracer allocates what its response needs and nothing for spans.
func TestNoTracerRejectAllocatesNothingMore(t *testing.T) {
	s := &Store{render: renderProblemJSON, observe: func(string, Outcome) {}}
	p := &Policy{Operation: "createThing"}
	err := fmt.Errorf("%w: the body's /key is a float64, not a string", ErrInvalidKey)
	ctx := context.Background()
	bare := testing.AllocsPerRun(100, func() { _ = s.rejection(p, err) })
	if n := testing.AllocsPerRun(100, func() { _ = s.Reject(ctx, p, err) }); n != bare {
		t.Errorf("%v allocations per Reject without a tracer, want %v (the response's alone)", n, bare)
	}
}
