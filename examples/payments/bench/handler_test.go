package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/idemgen/idemgen/examples/payments/service"
)

// BenchmarkHandler calls each variant's handler in-process (ServeHTTP with an
// httptest.ResponseRecorder: no sockets, no HTTP client), one request at a time with a
// fresh key, against the same durable database as BenchmarkHTTP. It is the Go layer's
// view: allocs/op and B/op are the handler's own per request, and a CPU profile of one
// variant holds only that variant's server-side Go (plus the pool's and pgx's reads of
// the database's answers):
//
//	go -C examples test ./payments/bench -run '^$' -bench 'Handler/idem$' -variants '^idem$' \
//		-benchtime 15000x -cpuprofile /tmp/idem.cpu -o /tmp/bench.test
//	go tool pprof -traces /tmp/bench.test /tmp/idem.cpu | go -C examples run ./payments/bench/profsplit -n 15050
//
// Its ns/op is dominated by the durable COMMIT's fsync (wall time, not CPU): compare
// variants by their profiles and allocations, not by ns/op. -variants restricts the
// variants as for BenchmarkHTTP (bare included only when it matches).
func BenchmarkHandler(b *testing.B) {
	pool := database(b)
	for _, v := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", bareHandler(pool)},
		{"protocol-floor", handWritten(pool, func() txProtocol { return &protocolFloor{} })},
		{"idem", service.New(pool, service.Options{Logf: func(format string, args ...any) { b.Errorf(format, args...) }})},
	} {
		if *only != "" && !regexp.MustCompile(*only).MatchString(v.name) {
			continue
		}
		b.Run(v.name, func(b *testing.B) {
			for range 50 { // warm up: connections, prepared statements
				serveOne(b, v.h)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				serveOne(b, v.h)
			}
		})
	}
}

// serveOne sends one POST /payments with a fresh key to h in-process and fails b unless
// it is answered 201.
func serveOne(b *testing.B, h http.Handler) {
	// A context that can be cancelled, as net/http's server gives every request (pgx
	// watches such a context during each query; httptest.NewRequest's cannot be).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/payments", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(service.AccountHeader, "acct-bench")
	req.Header.Set("Idempotency-Key", newKey())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusCreated {
		b.Fatalf("answered %d: %s", w.Code, w.Body.Bytes())
	}
}
