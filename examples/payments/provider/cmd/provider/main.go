// Command provider runs the payment-provider stand-in (package provider) on DATABASE_URL.
//
//	DATABASE_URL=postgres://... go -C examples run ./payments/provider/cmd/provider -addr 127.0.0.1:8090
//
// When it is ready it prints exactly one line on stdout, "listening on http://ADDR", and
// everything else on stderr. SIGINT or SIGTERM shut it down.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/provider"
	"github.com/idemgen/idemgen/idem"
)

func main() {
	fs := flag.NewFlagSet("provider", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "`HOST:PORT` to listen on (port 0 picks a free one)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "how long in-flight requests may run on shutdown")
	_ = fs.Parse(os.Args[1:])
	logger := log.New(os.Stderr, "provider: ", log.LstdFlags|log.Lmicroseconds)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		logger.Fatalf("DATABASE_URL: %v", err)
	}
	idem.ConfigureConnections(cfg, idem.DefaultTCPUserTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		logger.Fatal(err)
	}
	defer pool.Close()
	if err := provider.Setup(ctx, pool); err != nil {
		logger.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		logger.Fatal(err)
	}
	srv := &http.Server{Handler: provider.New(pool, logger.Printf), ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stdout, "listening on http://%s\n", ln.Addr())
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			logger.Fatal(err)
		}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(sctx)
}
