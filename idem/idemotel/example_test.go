package idemotel_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemotel"
)

// Spans for the idempotency protocol: set up OpenTelemetry's SDK as the service does
// anyway, and give the store a tracer. Under an HTTP server span (otelhttp's handler),
// each request gets idem.request with idem.claim, idem.business (the business method
// runs under it: its own spans nest there) and idem.complete, or idem.replay or
// idem.reject.
func ExampleNewTracer() {
	ctx := context.Background()
	// Add sdktrace.WithBatcher(exporter) with your backend's exporter (OTLP, ...).
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(ctx)
	otel.SetTracerProvider(tp)

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	// nil: otel's global provider, the one set above.
	store := idem.NewStore(pool, idem.WithTracer(idemotel.NewTracer(nil)))
	_ = store // wire it as the README shows, and the server in otelhttp.NewHandler
}
