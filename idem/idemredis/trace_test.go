package idemredis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

// spans records spans as "parent>name outcome status", in the order they end.
type spans struct {
	mu    sync.Mutex
	ended []string
}

type spanKey struct{}

func (s *spans) Start(ctx context.Context, span idem.Span, operation string) (context.Context, idem.SpanEnd) {
	parent, _ := ctx.Value(spanKey{}).(idem.Span)
	return context.WithValue(ctx, spanKey{}, span), func(r idem.SpanResult) {
		s.mu.Lock()
		defer s.mu.Unlock()
		line := fmt.Sprintf("%s>%s %s %d", parent, span, r.Outcome, r.Status)
		if r.Err != nil {
			line += " err"
		}
		s.ended = append(s.ended, line)
	}
}

func (s *spans) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ended
	s.ended = nil
	return out
}

// The Redis store's spans are the PostgreSQL store's: the same names, parents and results.
func TestSpans(t *testing.T) {
	tr := &spans{}
	e := newEnv(t, nil, WithTracer(tr))
	ctx := context.Background()
	ok := func(context.Context) (*idem.Response, error) { return created(1), nil }
	check := func(name string, want ...string) {
		t.Helper()
		if got := tr.take(); !slices.Equal(got, want) {
			t.Errorf("%s: spans\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if _, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), ok); err != nil {
		t.Fatal(err)
	}
	check("completed",
		"idem.request>idem.claim claimed 0",
		"idem.business>idem.complete completed 0",
		"idem.request>idem.business completed 0",
		">idem.request completed 201")
	_, _ = e.store.Do(ctx, testPolicy, ptr("k"), body("p"), ok)
	check("replayed",
		"idem.request>idem.claim replayed 0",
		"idem.request>idem.replay replayed 201",
		">idem.request replayed 201")
	_, _ = e.store.Do(ctx, testPolicy, ptr("k"), body("other"), ok)
	check("mismatch",
		"idem.request>idem.claim mismatch 0",
		"idem.request>idem.reject mismatch 422",
		">idem.request mismatch 422")
	e.srv.Kill()
	_, _ = e.store.Do(ctx, testPolicy, ptr("k2"), body("p"), ok)
	check("unavailable",
		"idem.request>idem.claim unavailable 0 err",
		"idem.request>idem.reject unavailable 503",
		">idem.request unavailable 503")
}
