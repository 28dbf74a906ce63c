package idemotel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemotel"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a store on a fresh database whose spans go to an in-memory exporter.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	store  *idem.Store
	spans  *tracetest.InMemoryExporter
	tracer trace.Tracer // the test's own spans (a request's parent, the service's work)
}

func newEnv(t *testing.T, opts ...idem.Option) *env {
	t.Helper()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE things (id bigserial PRIMARY KEY, payload text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	store := idem.NewStore(pool, append([]idem.Option{idem.WithTracer(idemotel.NewTracer(tp))}, opts...)...)
	return &env{t: t, pool: pool, store: store, spans: spans, tracer: tp.Tracer("test")}
}

var policy = &idem.Policy{Operation: "createThing", KeySource: "header Idempotency-Key", KeyRequired: true}

// do runs one call of Store.Do under a span of the test named name (the HTTP server
// span's place), and fails the test on an error.
func (e *env) do(name string, key *string, payload string, fn idem.Func) *idem.Response {
	e.t.Helper()
	resp, err := e.try(name, key, payload, fn)
	if err != nil {
		e.t.Fatalf("%s: Do: %v", name, err)
	}
	return resp
}

// try is do returning Do's error.
func (e *env) try(name string, key *string, payload string, fn idem.Func) (*idem.Response, error) {
	ctx, span := e.tracer.Start(context.Background(), name)
	defer span.End()
	return e.store.Do(ctx, policy, key, []idem.Part{{Name: "body", Value: map[string]string{"payload": payload}}}, fn)
}

// insert is a business function: one row in things, a 201 echoing the payload.
func insert(payload string) idem.Func {
	return func(ctx context.Context, tx idem.Tx) (*idem.Response, error) {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO things (payload) VALUES ($1) RETURNING id`, payload).Scan(&id); err != nil {
			return nil, err
		}
		return &idem.Response{Status: http.StatusCreated, Body: fmt.Appendf(nil, `{"id":%d,"payload":%q}`, id, payload)}, nil
	}
}

func ptr(s string) *string { return &s }

// tree renders the exported spans as an indented tree, children in the order they
// ended: "name outcome=O status=S" with the span status when it is Error.
func (e *env) tree() string {
	spans := e.spans.GetSpans()
	children := map[trace.SpanID][]int{}
	var roots []int
	exported := map[trace.SpanID]bool{}
	for _, s := range spans {
		exported[s.SpanContext.SpanID()] = true
	}
	for i, s := range spans {
		if p := s.Parent.SpanID(); s.Parent.IsValid() && exported[p] {
			children[p] = append(children[p], i)
		} else {
			roots = append(roots, i)
		}
	}
	var b strings.Builder
	var walk func(i, depth int)
	walk = func(i, depth int) {
		s := spans[i]
		b.WriteString(strings.Repeat("  ", depth) + s.Name)
		for _, kv := range s.Attributes {
			switch kv.Key {
			case idemotel.OutcomeKey:
				b.WriteString(" outcome=" + kv.Value.AsString())
			case "http.response.status_code":
				b.WriteString(" status=" + kv.Value.Emit())
			case "error.type":
				b.WriteString(" error.type=" + kv.Value.AsString())
			}
		}
		if s.Status.Code == codes.Error {
			b.WriteString(" ERROR")
		}
		b.WriteString("\n")
		for _, c := range children[s.SpanContext.SpanID()] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

func (e *env) wantTree(want string) {
	e.t.Helper()
	want = strings.TrimLeft(want, "\n")
	if got := e.tree(); got != want {
		e.t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
}

func TestFreshRequest(t *testing.T) {
	e := newEnv(t)
	e.do("fresh", ptr("k1"), "a", insert("a"))
	e.wantTree(`
fresh
  idem.request outcome=completed status=201
    idem.claim outcome=claimed
    idem.business outcome=completed
      idem.complete outcome=completed
`)
	for _, s := range e.spans.GetSpans() {
		if !strings.HasPrefix(s.Name, "idem.") {
			continue
		}
		if s.InstrumentationScope.Name != idemotel.ScopeName || s.SpanKind != trace.SpanKindInternal {
			t.Errorf("%s: scope %q, kind %v", s.Name, s.InstrumentationScope.Name, s.SpanKind)
		}
		if v, ok := attr(s, idemotel.OperationKey); !ok || v.AsString() != "createThing" {
			t.Errorf("%s: idem.operation = %v, want createThing", s.Name, v.Emit())
		}
	}
}

func attr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestReplay(t *testing.T) {
	e := newEnv(t)
	e.do("first", ptr("k1"), "a", insert("a"))
	e.spans.Reset()
	resp := e.do("retry", ptr("k1"), "a", insert("a"))
	if resp.Outcome != idem.OutcomeReplayed {
		t.Fatalf("outcome %s, want replayed", resp.Outcome)
	}
	e.wantTree(`
retry
  idem.request outcome=replayed status=201
    idem.claim outcome=replayed
    idem.replay outcome=replayed status=201
`)
}

// A duplicate that arrives while the first request is in its business function is
// answered 409: a reject span with the status. The first is held in its business
// function by a channel.
func TestConcurrentDuplicate(t *testing.T) {
	e := newEnv(t)
	inBusiness, finish := make(chan struct{}), make(chan struct{})
	firstDone := make(chan *idem.Response)
	go func() {
		resp, _ := e.try("first", ptr("k1"), "a", func(ctx context.Context, tx idem.Tx) (*idem.Response, error) {
			close(inBusiness)
			<-finish
			return insert("a")(ctx, tx)
		})
		firstDone <- resp
	}()
	<-inBusiness
	dup := e.do("duplicate", ptr("k1"), "a", insert("a"))
	close(finish)
	if first := <-firstDone; first == nil || first.Outcome != idem.OutcomeCompleted {
		t.Fatalf("first: %+v, want completed", first)
	}
	if dup.Status != http.StatusConflict {
		t.Fatalf("duplicate: status %d, want 409", dup.Status)
	}
	e.wantTree(`
duplicate
  idem.request outcome=in_progress status=409
    idem.claim outcome=in_progress
    idem.reject outcome=in_progress status=409
first
  idem.request outcome=completed status=201
    idem.claim outcome=claimed
    idem.business outcome=completed
      idem.complete outcome=completed
`)
}

func TestMismatch(t *testing.T) {
	e := newEnv(t)
	e.do("first", ptr("k1"), "a", insert("a"))
	e.spans.Reset()
	e.do("other payload", ptr("k1"), "b", insert("b"))
	e.wantTree(`
other payload
  idem.request outcome=mismatch status=422
    idem.claim outcome=mismatch
    idem.reject outcome=mismatch status=422
`)
}

func TestMissingKey(t *testing.T) {
	e := newEnv(t)
	e.do("no key", nil, "a", insert("a"))
	e.wantTree(`
no key
  idem.request outcome=missing_key status=400
    idem.reject outcome=missing_key status=400
`)
}

func TestUnkeyed(t *testing.T) {
	e := newEnv(t)
	optional := *policy
	optional.KeyRequired = false
	ctx, span := e.tracer.Start(context.Background(), "no key, optional")
	if _, err := e.store.Do(ctx, &optional, nil, nil, insert("a")); err != nil {
		t.Fatal(err)
	}
	span.End()
	e.wantTree(`
no key, optional
  idem.request outcome=unkeyed status=201
    idem.business outcome=unkeyed
`)
}

// A business error ends the business and request spans with status Error, the error
// recorded as an exception event; a 5xx answer (not stored) is an Error on the request
// span only.
func TestFailures(t *testing.T) {
	e := newEnv(t)
	errNo := errors.New("the payment provider said no")
	_, err := e.try("business error", ptr("k1"), "a", func(context.Context, idem.Tx) (*idem.Response, error) {
		return nil, errNo
	})
	if !errors.Is(err, errNo) {
		t.Fatalf("Do: %v, want the business error", err)
	}
	e.do("unavailable", ptr("k2"), "a", func(context.Context, idem.Tx) (*idem.Response, error) {
		return &idem.Response{Status: http.StatusServiceUnavailable, Body: []byte("{}")}, nil
	})
	e.wantTree(`
business error
  idem.request outcome=failed error.type=*errors.errorString ERROR
    idem.claim outcome=claimed
    idem.business outcome=failed error.type=*errors.errorString ERROR
unavailable
  idem.request outcome=not_stored status=503 error.type=503 ERROR
    idem.claim outcome=claimed
    idem.business outcome=not_stored
`)
	for _, s := range e.spans.GetSpans() {
		if s.Status.Code != codes.Error || s.Status.Description == "" {
			continue
		}
		if s.Status.Description != errNo.Error() || len(s.Events) != 1 || s.Events[0].Name != "exception" {
			t.Errorf("%s: status %q, events %+v; want the business error recorded", s.Name, s.Status.Description, s.Events)
		}
	}
}

// A panicking business function still ends every span (with idem.ErrNoReturn), and the
// panic goes on.
func TestPanicEndsSpans(t *testing.T) {
	e := newEnv(t)
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want the business function's panic", v)
			}
		}()
		e.try("panics", ptr("k1"), "a", func(context.Context, idem.Tx) (*idem.Response, error) { panic("boom") })
	}()
	e.wantTree(`
panics
  idem.request outcome=failed error.type=*errors.errorString ERROR
    idem.claim outcome=claimed
    idem.business outcome=failed error.type=*errors.errorString ERROR
`)
	for _, s := range e.spans.GetSpans() {
		if s.Status.Code == codes.Error && s.Status.Description != idem.ErrNoReturn.Error() {
			t.Errorf("%s: status %q, want %q", s.Name, s.Status.Description, idem.ErrNoReturn)
		}
	}
}

// The business function runs under the business span: a span the service starts in it
// is the business span's child.
func TestBusinessContextCarriesSpan(t *testing.T) {
	e := newEnv(t)
	var inside trace.SpanContext
	e.do("fresh", ptr("k1"), "a", func(ctx context.Context, tx idem.Tx) (*idem.Response, error) {
		inside = trace.SpanContextFromContext(ctx)
		ctx, span := e.tracer.Start(ctx, "charge card")
		defer span.End()
		return insert("a")(ctx, tx)
	})
	e.wantTree(`
fresh
  idem.request outcome=completed status=201
    idem.claim outcome=claimed
    idem.business outcome=completed
      charge card
      idem.complete outcome=completed
`)
	for _, s := range e.spans.GetSpans() {
		if s.Name == string(idem.SpanBusiness) && s.SpanContext.SpanID() != inside.SpanID() {
			t.Errorf("the business function's context carries span %s, want idem.business (%s)", inside.SpanID(), s.SpanContext.SpanID())
		}
	}
}

// No span, attribute, event or status of any kind of call holds the key, the scope or
// the body in clear.
func TestNoKeyScopeOrBody(t *testing.T) {
	const key, scope, payload = "key-7f3a9c", "tenant-4b1e22", "body-93d0aa"
	e := newEnv(t, idem.WithScope(func(context.Context) (string, error) { return scope, nil }))
	e.do("fresh", ptr(key), payload, insert(payload))
	e.do("replay", ptr(key), payload, insert(payload))
	e.do("mismatch", ptr(key), payload+"x", insert(payload+"x"))
	e.do("invalid key", ptr(key+"\x01"), payload, insert(payload))
	e.try("business error", ptr(key+"e"), payload, func(context.Context, idem.Tx) (*idem.Response, error) {
		return nil, errors.New("failed")
	})
	spans := e.spans.GetSpans()
	if len(spans) < 20 {
		t.Fatalf("%d spans, want every call traced", len(spans))
	}
	for _, s := range spans {
		texts := []string{s.Name, s.Status.Description}
		kvs := append([]attribute.KeyValue(nil), s.Attributes...)
		for _, ev := range s.Events {
			texts = append(texts, ev.Name)
			kvs = append(kvs, ev.Attributes...)
		}
		for _, kv := range kvs {
			texts = append(texts, string(kv.Key), kv.Value.Emit())
		}
		for _, text := range texts {
			for _, secret := range []string{key, scope, payload} {
				if strings.Contains(text, secret) {
					t.Errorf("span %s holds %q: %q", s.Name, secret, text)
				}
			}
		}
	}
}

// A key past its retention is taken over: the claim span says so.
func TestTakeover(t *testing.T) {
	e := newEnv(t)
	short := *policy
	short.Lease, short.Retention = 50*time.Millisecond, 50*time.Millisecond
	ctx := context.Background()
	body := []idem.Part{{Name: "body", Value: "a"}}
	if _, err := e.store.Do(ctx, &short, ptr("k1"), body, insert("a")); err != nil {
		t.Fatal(err)
	}
	// Wait for the database clock to pass the retention (not for another goroutine).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var expired bool
		if err := e.pool.QueryRow(ctx, `SELECT expires_at <= now() FROM idempotency_keys`).Scan(&expired); err != nil {
			t.Fatal(err)
		}
		if expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the key did not expire")
		}
	}
	e.spans.Reset()
	ctx, span := e.tracer.Start(ctx, "after retention")
	if _, err := e.store.Do(ctx, &short, ptr("k1"), body, insert("a")); err != nil {
		t.Fatal(err)
	}
	span.End()
	e.wantTree(`
after retention
  idem.request outcome=completed status=201
    idem.claim outcome=taken_over
    idem.business outcome=completed
      idem.complete outcome=completed
`)
}

// A request the generated handler refuses before Store.Do (a body key that is not a
// string, a body over the limit) has the spans of Do's own rejections, under the span in
// the context given to Store.Reject.
func TestRejectBeforeDo(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"body key not a string", fmt.Errorf("%w: the body's /key is a float64, not a string", idem.ErrInvalidKey)},
		{"body too large", idem.ErrBodyTooLarge},
	} {
		ctx, span := e.tracer.Start(context.Background(), c.name)
		e.store.Reject(ctx, policy, c.err)
		span.End()
	}
	e.wantTree(`
body key not a string
  idem.request outcome=invalid_key status=400
    idem.reject outcome=invalid_key status=400
body too large
  idem.request outcome=rejected status=413
    idem.reject outcome=rejected status=413
`)
}
