// Command demo is the payments example in one command:
//
//	go -C examples run ./payments/cmd/demo
//
// It regenerates the example's handlers from openapi.yaml (in-process, with idemgen's
// generator; when they were stale it writes them and re-runs itself on the new code),
// starts the service on an embedded throwaway PostgreSQL (or DATABASE_URL) with a
// simulated downstream delay so that duplicates overlap a request in flight, hammers it
// with concurrent duplicates (idemgen hammer's engine), then creates payments with the
// generated api.IdempotentClient through a lossy network (toxiproxy dropping 30% of the
// responses after the service processed them, resetting 10% of the connections before),
// audits the database, and prints a table: requests, 201s, 409s, replays, payments
// created, the client's calls and attempts, audit result. Then, on a throwaway
// redis-server (or REDIS_ADDR), the same for starPayment, whose keys live in Redis
// (store: redis): its table, and the stars counted in PostgreSQL against its keys.
//
// Progress goes to stderr, the table to stdout. Exit status 1 when a check fails: a
// duplicate execution, a mismatched replay, a 5xx, a row count off, or the audit.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/examples/payments/internal/devdb"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/internal/hammer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// config is the demo's knobs (flags).
type config struct {
	delay       time.Duration
	duplicates  int // phase 1: concurrent duplicates of one key
	retries     int // phase 1: retries of that key once it has completed
	keys        int // phase 2: distinct keys
	perKey      int // phase 2: concurrent duplicates per key
	retriesLate int // phase 3: retries per key of phase 2, after completion
	clientCalls int // phase 4: payments through the generated client, over a lossy network
	concurrency int
	noGenerate  bool
	verbose     bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&c.delay, "delay", 200*time.Millisecond, "simulated downstream latency inside each payment's transaction")
	fs.IntVar(&c.duplicates, "duplicates", 50, "phase 1: concurrent duplicates of one key")
	fs.IntVar(&c.retries, "retries", 10, "phase 1: retries of that key after it completed")
	fs.IntVar(&c.keys, "keys", 200, "phase 2: distinct keys")
	fs.IntVar(&c.perKey, "per-key", 5, "phase 2: concurrent duplicates per key")
	fs.IntVar(&c.retriesLate, "late-retries", 2, "phase 3: retries of each phase-2 key after it completed")
	fs.IntVar(&c.clientCalls, "client-calls", 200, "phase 4: payments through the generated client over a lossy network (0: none)")
	fs.IntVar(&c.concurrency, "c", 50, "phases 2 and 3: requests in flight at most")
	fs.BoolVar(&c.noGenerate, "no-generate", false, "do not regenerate the handlers first")
	fs.BoolVar(&c.verbose, "v", false, "print hammer's full summary of each phase on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if c.duplicates < 1 || c.retries < 0 || c.keys < 1 || c.perKey < 1 || c.retriesLate < 0 || c.clientCalls < 0 || c.concurrency < c.perKey {
		fmt.Fprintln(stderr, "demo: -duplicates, -keys, -per-key must be at least 1, retries and -client-calls at least 0, and -c at least -per-key")
		return 2
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "demo: "+format+"\n", args...) }

	// 1. The handlers, from the spec.
	if !c.noGenerate {
		stale, code := regenerate(logf)
		if code != 0 {
			return code
		}
		if stale {
			return rerun(ctx, args, stdout, stderr, logf)
		}
	}

	// 2. The service, on a real PostgreSQL.
	url, stopDB, err := devdb.URL(ctx, func(format string, args ...any) {
		if c.verbose || !strings.HasPrefix(format, "pgembed") {
			logf(format, args...)
		}
	})
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer stopDB()
	d, err := service.Open(ctx, url, 64)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer d.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		logf("%v", err)
		return 1
	}
	// 3. Redis, for the operation whose keys live there (starPayment, store: redis).
	stars, stopRedis := redisStore(ctx, logf)
	defer stopRedis()
	srv := &http.Server{Handler: service.New(d.Pool, service.Options{Delay: c.delay, Logf: logf, Redis: stars}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	logf("payments service listening on %s (simulated downstream delay %s)", base, c.delay)

	ok := demo(ctx, c, base, d.Pool, stdout, stderr, logf)
	if ok && stars != nil {
		ok = starsDemo(ctx, c, base, d.Pool, stdout, stderr, logf)
	}
	if !ok {
		return 1
	}
	return 0
}

// phase is one hammer run and the rows it created.
type phase struct {
	name string
	res  *hammer.Result
	rows int64
	want int64 // rows it must create
}

func demo(ctx context.Context, c config, base string, pool *pgxpool.Pool, stdout, stderr io.Writer, logf func(string, ...any)) bool {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	runID := hex.EncodeToString(rnd[:])
	const account = "acct_demo"
	q := db.New(pool)

	hammerPhase := func(name, prefix string, requests, keys, concurrency int, want int64) (*phase, error) {
		logf("%s ...", name)
		before, err := q.CountPaymentsByKeyPrefix(ctx, db.CountPaymentsByKeyPrefixParams{Scope: account, KeyPrefix: prefix})
		if err != nil {
			return nil, err
		}
		res, err := hammer.Run(ctx, hammer.Config{
			URL:    base + "/payments",
			Method: http.MethodPost,
			Header: http.Header{"Content-Type": {"application/json"}, service.AccountHeader: {account}},
			// Each key its own payload: an order number in the description.
			Body:        []byte(`{"amount":1999,"currency":"EUR","description":"order {{i}}"}`),
			Requests:    requests,
			Keys:        keys,
			Concurrency: concurrency,
			KeyPrefix:   prefix,
			Progress:    stderr,
		})
		if err != nil {
			return nil, err
		}
		after, err := q.CountPaymentsByKeyPrefix(ctx, db.CountPaymentsByKeyPrefixParams{Scope: account, KeyPrefix: prefix})
		if err != nil {
			return nil, err
		}
		if c.verbose {
			res.WriteTable(stderr)
		}
		return &phase{name: name, res: res, rows: after - before, want: want}, nil
	}

	one := "demo-" + runID + "-one-"
	many := "demo-" + runID + "-many-"
	var phases []*phase
	for _, p := range []struct {
		name                        string
		prefix                      string
		requests, keys, concurrency int
		want                        int64
	}{
		{fmt.Sprintf("1. one key: %d duplicates at once, then %d retries", c.duplicates, c.retries), one,
			c.duplicates + c.retries, 1, c.duplicates, 1},
		{fmt.Sprintf("2. %d keys x %d duplicates at once", c.keys, c.perKey), many,
			c.keys * c.perKey, c.keys, c.concurrency, int64(c.keys)},
		{fmt.Sprintf("3. the %d keys retried %d times each", c.keys, c.retriesLate), many,
			c.keys * c.retriesLate, c.keys, c.concurrency, 0},
	} {
		if p.requests == 0 {
			continue
		}
		ph, err := hammerPhase(p.name, p.prefix, p.requests, p.keys, p.concurrency, p.want)
		if err != nil {
			logf("%s: %v", p.name, err)
			return false
		}
		phases = append(phases, ph)
		if ctx.Err() != nil {
			logf("interrupted")
			return false
		}
	}

	var client *clientRun
	if c.clientCalls > 0 {
		var err error
		if client, err = clientPhase(ctx, c.clientCalls, min(c.concurrency, 16), base, account, "demo-"+runID+"-client-", q, logf); err != nil {
			logf("client phase: %v", err)
			return false
		}
	}

	rep, err := service.Audit(ctx, pool)
	if err != nil {
		logf("audit: %v", err)
		return false
	}

	// The table.
	ok := rep.OK()
	var problems []string
	var tot hammer.Result
	tot.Status = map[int]int{}
	var totRows int64
	width := len("total")
	for _, p := range phases {
		width = max(width, len(p.name))
	}
	fmt.Fprintf(stdout, "%-*s  %8s  %7s  %8s  %8s  %5s  %8s\n", width, "", "requests", "201 new", "replayed", "409 busy", "other", "payments")
	row := func(name string, r *hammer.Result, rows int64) {
		created, replayed, conflicts := r.Executions, r.Replays, r.Status[http.StatusConflict]
		other := r.Requests - created - replayed - conflicts
		fmt.Fprintf(stdout, "%-*s  %8d  %7d  %8d  %8d  %5d  %8d\n", width, name, r.Requests, created, replayed, conflicts, other, rows)
	}
	for _, p := range phases {
		row(p.name, p.res, p.rows)
		tot.Requests += p.res.Requests
		tot.Executions += p.res.Executions
		tot.Replays += p.res.Replays
		tot.Status[http.StatusConflict] += p.res.Status[http.StatusConflict]
		totRows += p.rows
		for _, pr := range p.res.Problems() {
			problems = append(problems, p.name+": "+pr)
		}
		if p.rows != p.want {
			problems = append(problems, fmt.Sprintf("%s: %d payments created, want %d", p.name, p.rows, p.want))
		}
	}
	row("total", &tot, totRows)
	fmt.Fprintln(stdout, "(201 new: the request created the payment; replayed: 201 again, byte-identical, Idempotent-Replayed: true;")
	fmt.Fprintln(stdout, " 409 busy: the key's first request was still running, Retry-After given; payments: rows the phase added)")
	calls := tot.Requests
	if client != nil {
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "%s (api.IdempotentClient, one key per call):\n", client.name)
		fmt.Fprintf(stdout, "  %d of %d calls answered 201 in %s: %d attempts, %d of them lost (%.0f%% of responses dropped, %.0f%% of connections reset),\n",
			client.answered, client.calls, client.elapsed.Round(time.Millisecond), client.attempts, client.transportErrors, 100*lossyDrop, 100*lossyReset)
		fmt.Fprintf(stdout, "  %d answers replayed (the lost response of a payment already made); %d payments created\n", client.replays, client.rows)
		problems = append(problems, client.problems()...)
		calls += client.calls
		totRows += client.rows
	}

	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "audit (every completed key has exactly one payments row, every row a completed key):\n  %s\n", rep.Payments)
	if !rep.Refunds.OK() || rep.Refunds.Rows > 0 {
		fmt.Fprintf(stdout, "  %s\n", rep.Refunds)
	}
	for _, s := range rep.Samples {
		fmt.Fprintf(stdout, "  %s: %s: scope %q key %q\n", s.Operation, s.Problem, s.Scope, s.Key)
	}
	for _, p := range problems {
		fmt.Fprintf(stdout, "FAIL: %s\n", p)
	}
	if len(problems) > 0 {
		ok = false
	}
	fmt.Fprintln(stdout)
	if ok {
		fmt.Fprintf(stdout, "%d requests, %d payments: a payment was never created twice.\n", calls, totRows)
	} else {
		fmt.Fprintln(stdout, "FAILED: see above.")
	}
	return ok
}

// exampleDir finds examples/payments: next to this source file when the demo runs from a
// checkout (go run), else through the go command.
func exampleDir() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "..")
		if _, err := os.Stat(filepath.Join(dir, "openapi.yaml")); err == nil {
			return dir, nil
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "github.com/idemgen/idemgen/examples/payments").Output()
	if err != nil {
		return "", fmt.Errorf("cannot find examples/payments (run the demo from the idemgen checkout): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// regenerate runs idemgen's generator on openapi.yaml, as the go:generate line in
// examples/payments/doc.go does. It writes the files and reports stale when they differed.
func regenerate(logf func(string, ...any)) (stale bool, code int) {
	dir, err := exampleDir()
	if err != nil {
		logf("%v", err)
		return false, 1
	}
	spec := filepath.Join(dir, "openapi.yaml")
	apiDir := filepath.Join(dir, "api")
	files, err := gen.Generate(gen.Options{Spec: spec, Package: "api", Dir: apiDir, Client: true})
	if err != nil {
		for _, e := range gen.Errors(err) {
			logf("%v", e)
		}
		logf("generating the handlers from %s: %v", spec, err)
		return false, 1
	}
	var changed []string
	for _, f := range files {
		old, err := os.ReadFile(filepath.Join(apiDir, f.Name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			logf("%v", err)
			return false, 1
		}
		if !bytes.Equal(old, f.Data) {
			changed = append(changed, f.Name)
		}
	}
	var names []string
	for _, f := range files {
		names = append(names, "api/"+f.Name)
	}
	if len(changed) == 0 {
		logf("generated %s from openapi.yaml with idemgen: the committed files are up to date", strings.Join(names, ", "))
		return false, 0
	}
	if err := gen.Write(apiDir, files); err != nil {
		logf("%v", err)
		return false, 1
	}
	logf("regenerated %s from openapi.yaml with idemgen: %s changed", strings.Join(names, ", "), strings.Join(changed, ", "))
	return true, 0
}

// rerun runs the demo again with `go run`, so that it serves the handlers just written.
func rerun(ctx context.Context, args []string, stdout, stderr io.Writer, logf func(string, ...any)) int {
	dir, err := exampleDir()
	if err != nil {
		logf("%v", err)
		return 1
	}
	logf("re-running the demo on the new handlers (go run ./cmd/demo: it compiles them first, up to a minute with a cold build cache)")
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./cmd/demo", "-no-generate"}, args...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		logf("%v", err)
		return 1
	}
	return 0
}
