package idemotel_test

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemotel"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// BenchmarkTracing measures a fresh request (claim, one insert, completion) without a
// tracer and with idemotel on OpenTelemetry's SDK (every span sampled, exported to a
// no-op exporter by the simple processor and by the batch processor), on the test
// cluster. Compare each with untraced, in the same run: the ratio is the cost of the
// spans. (The batch processor wakes its goroutine for every span that ends; on a machine
// with as few cores as a shared CI runner, with PostgreSQL on it, that wake-up shows in
// the latency more than the spans do.)
func BenchmarkTracing(b *testing.B) {
	pool := pgtest.Pool(b, pgtest.NewDB(b))
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE things (id bigserial PRIMARY KEY, payload text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	traced := func(opt sdktrace.TracerProviderOption) *idem.Store {
		tp := sdktrace.NewTracerProvider(opt)
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return idem.NewStore(pool, idem.WithTracer(idemotel.NewTracer(tp)))
	}
	stores := []struct {
		name  string
		store *idem.Store
	}{
		{"untraced", idem.NewStore(pool)},
		{"otel-simple", traced(sdktrace.WithSyncer(tracetest.NewNoopExporter()))},
		{"otel-batch", traced(sdktrace.WithBatcher(tracetest.NewNoopExporter()))},
	}
	n := 0
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n++
				key := fmt.Sprintf("bench-%d", n)
				resp, err := s.store.Do(ctx, policy, &key, nil, insert("x"))
				if err != nil || resp.Outcome != idem.OutcomeCompleted {
					b.Fatal(resp, err)
				}
			}
		})
	}
}
