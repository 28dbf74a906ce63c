// Command server runs the payments example service.
//
//	go -C examples run ./payments/cmd/server -addr 127.0.0.1:8080 [-delay 200ms]
//
// DATABASE_URL selects the PostgreSQL database. When it is empty, the server starts an
// embedded throwaway PostgreSQL from the local binaries (initdb, postgres) and says so on
// stderr; its data is deleted on exit (package devdb: a convenience of the example, which
// a real service replaces by its own database URL). The schemas (idempotency_keys, payments, refunds)
// are applied on start. REDIS_ADDR selects the Redis of starPayment (store: redis); when
// it is empty the server starts a throwaway redis-server, and without one starPayment
// answers 503. When the server is ready it prints exactly one line on stdout,
//
//	listening on http://ADDR
//
// and everything else on stderr. SIGINT or SIGTERM shut it down cleanly: in-flight
// requests finish (up to -shutdown-timeout), then the pool closes and the embedded
// PostgreSQL stops. Exit status 0 after a clean shutdown.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/internal/devdb"
	providerapi "github.com/idemgen/idemgen/examples/payments/provider/api"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/idem/idemredis"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "`HOST:PORT` to listen on (port 0 picks a free one)")
	delay := fs.Duration("delay", 0, "simulated downstream latency inside the business transaction of createPayment and createRefund")
	starDelay := fs.Duration("star-delay", 0, "simulated latency inside starPayment, before its write")
	maxBody := fs.Int64("max-body", service.DefaultMaxBodyBytes, "request body limit in `BYTES` (413 beyond)")
	maxConns := fs.Int("max-conns", 32, "database pool size")
	unmarkedTimeout := fs.Duration("unmarked-timeout", service.DefaultUnmarkedTimeout, "bound on each operation without x-idempotent (GET /payments/{id}); 503 with Retry-After past it")
	providerURL := fs.String("provider-url", "", "`URL` of the payment provider (the stand-in, ./payments/provider/cmd/provider); empty: no provider call")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "how long in-flight requests may run on shutdown")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "server: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	logger := log.New(stderr, "server: ", log.LstdFlags|log.Lmicroseconds)
	logf := func(format string, args ...any) { logger.Printf(format, args...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	url, stopDB, err := devdb.URL(ctx, logf)
	if err != nil {
		logger.Print(err)
		return 1
	}
	defer func() {
		if err := stopDB(); err != nil {
			logger.Printf("stopping PostgreSQL: %v", err)
		}
	}()
	d, err := service.Open(ctx, url, int32(*maxConns))
	if err != nil {
		logger.Print(err)
		return 1
	}
	defer d.Close()

	// starPayment keeps its idempotency keys in Redis (store: redis): REDIS_ADDR, or a
	// throwaway redis-server. Without one it answers 503; the payments run as usual.
	var stars *idemredis.Store
	if raddr, stopRedis, err := devdb.RedisAddr(logf); errors.Is(err, devdb.ErrNoRedisServer) {
		logf("%v: starPayment answers 503", err)
	} else if err != nil {
		logf("no Redis (%v): starPayment answers 503", err)
	} else {
		defer stopRedis()
		rdb := redis.NewClient(&redis.Options{Addr: raddr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		if stars, err = service.NewRedisStore(ctx, rdb, nil); err != nil {
			logger.Print(err)
			return 1
		}
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		logger.Print(err)
		return 1
	}
	opts := service.Options{Delay: *delay, MaxBodyBytes: *maxBody, Logf: logf, Redis: stars, UnmarkedTimeout: *unmarkedTimeout}
	if *providerURL != "" {
		// The business timeout (the request's context) bounds the charge's attempts too.
		retry := &idemclient.Client{MaxAttempts: 5, BaseDelay: 20 * time.Millisecond, MaxDelay: 500 * time.Millisecond, MaxRetryAfter: 2 * time.Second, AttemptTimeout: 3 * time.Second}
		if opts.Provider, err = providerapi.NewIdempotentClient(*providerURL, retry); err != nil {
			logger.Print(err)
			return 2
		}
	}
	if *starDelay > 0 {
		opts.BeforeStar = service.Sleep(*starDelay)
	}
	srv := &http.Server{
		Handler:           service.New(d.Pool, opts),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if *delay > 0 {
		logf("simulated downstream delay: %s", *delay)
	}
	// The one line on stdout. os.Stdout is unbuffered: written is flushed.
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())

	select {
	case err := <-served:
		logger.Printf("serve: %v", err)
		return 1
	case <-ctx.Done():
	}
	stop() // a second signal kills the process
	logf("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Printf("shutdown: %v", err)
		return 1
	}
	logf("stopped")
	return 0
}
