package hammer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Exit statuses of [Main].
const (
	ExitOK    = 0 // every check passed
	ExitFail  = 1 // a 5xx, transport error, mismatched replay or duplicate execution, or interrupted
	ExitUsage = 2 // bad flags or arguments
)

const usageText = `usage: idemgen hammer -url URL [flags]

Sends -n requests to an idempotent endpoint, spread over -keys idempotency keys, each
key's duplicates released at the same instant with at most -c requests in flight, and
checks that every key executed at most once (one non-replayed 2xx), that every replay
("Idempotent-Replayed: true") matches its key's original response byte for byte, and
that there were no 5xx responses or transport errors.

{{key}} and {{i}} in -url, -d and -H values are replaced by the key and its 0-based index.

Exit status: 0 all good; 1 a 5xx, transport error, mismatched replay, duplicate
execution, or interrupted; 2 usage error.

Example:
  idemgen hammer -url http://localhost:8080/orders -n 1000 -c 50 -keys 100 \
    -H 'Content-Type: application/json' -d '{"ref":"{{key}}","qty":{{i}}}'

Flags:
`

// headerFlags collects repeated -H 'Name: value' flags.
type headerFlags struct{ h http.Header }

func (f *headerFlags) String() string { return "" }

func (f *headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || !validToken(name) {
		return fmt.Errorf("want 'Name: value', got %q", s)
	}
	if f.h == nil {
		f.h = make(http.Header)
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

// Main runs `idemgen hammer`: args exclude the subcommand name. It writes the summary to
// stdout, progress and usage to stderr, and returns the exit status ([ExitOK],
// [ExitFail] or [ExitUsage]). Cancelling ctx stops the run and prints the partial
// summary.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idemgen hammer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		io.WriteString(stderr, usageText)
		fs.PrintDefaults()
	}
	var (
		headers   headerFlags
		cfg       Config
		body      string
		jsonOut   bool
		quiet     bool
		keyPrefix string
	)
	fs.StringVar(&cfg.URL, "url", "", "endpoint `URL` (required)")
	fs.StringVar(&cfg.Method, "X", DefaultMethod, "HTTP `METHOD`")
	fs.Var(&headers, "H", "request header `'Name: value'` (repeatable)")
	fs.StringVar(&body, "d", "", "request `BODY`; @file reads it from file")
	fs.IntVar(&cfg.Requests, "n", DefaultRequests, "total `REQUESTS`")
	fs.IntVar(&cfg.Concurrency, "c", DefaultConcurrency, "maximum requests in flight, `CONCURRENCY`")
	fs.IntVar(&cfg.Keys, "keys", DefaultKeys, "number of distinct idempotency keys, `K`; each gets n/K duplicates")
	fs.StringVar(&cfg.KeyHeader, "key-header", DefaultKeyHeader, "idempotency key header `NAME`")
	fs.StringVar(&keyPrefix, "key-prefix", "", "key `PREFIX`; key i is PREFIX+i (default random per run)")
	fs.DurationVar(&cfg.Timeout, "timeout", DefaultTimeout, "per-request `TIMEOUT`, from release to end of body")
	fs.BoolVar(&jsonOut, "json", false, "print the summary as JSON")
	fs.BoolVar(&quiet, "q", false, "no progress lines on stderr")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "idemgen hammer: %s\n", fmt.Sprintf(format, a...))
		fmt.Fprintln(stderr, "Run 'idemgen hammer -h' for usage.")
		return ExitUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if cfg.URL == "" {
		return usageErr("-url is required")
	}
	// Zero would mean "default" to Run; on the command line it is a mistake.
	for _, f := range []struct {
		name string
		v    int
	}{{"n", cfg.Requests}, {"c", cfg.Concurrency}, {"keys", cfg.Keys}} {
		if f.v < 1 {
			return usageErr("-%s must be at least 1, got %d", f.name, f.v)
		}
	}
	if cfg.Timeout <= 0 {
		return usageErr("-timeout must be positive, got %s", cfg.Timeout)
	}
	if cfg.KeyHeader == "" {
		return usageErr("-key-header must not be empty")
	}
	isSet := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { isSet[f.Name] = true })
	if isSet["key-prefix"] && keyPrefix == "" {
		return usageErr("-key-prefix must not be empty")
	}
	cfg.KeyPrefix = keyPrefix
	if isSet["d"] {
		if file, ok := strings.CutPrefix(body, "@"); ok {
			b, err := os.ReadFile(file)
			if err != nil {
				return usageErr("-d: %v", err)
			}
			cfg.Body = b
		} else {
			cfg.Body = []byte(body)
		}
	}
	cfg.Header = headers.h
	if !quiet {
		cfg.Progress = stderr
	}

	res, err := Run(ctx, cfg)
	if err != nil {
		return usageErr("%v", err)
	}
	if jsonOut {
		if err := res.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "idemgen hammer: %v\n", err)
			return ExitFail
		}
	} else {
		res.WriteTable(stdout)
	}
	if !res.OK() {
		return ExitFail
	}
	return ExitOK
}
