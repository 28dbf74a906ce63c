package hammer

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/idemgen/idemgen/internal/cliflag"
)

// Exit statuses of [Main].
const (
	ExitOK    = cliflag.ExitOK    // every check passed
	ExitFail  = 1                 // a 5xx, transport error, 4xx other than 409 and 422, key never executed, mismatched replay or duplicate execution, or interrupted
	ExitUsage = cliflag.ExitUsage // bad flags or arguments
)

const usageText = `usage: idemgen hammer -url URL [flags]

Sends -n requests to an idempotent endpoint, spread over -keys idempotency keys, each
key's duplicates released at the same instant with at most -c requests in flight, and
checks that every key executed at most once (one non-replayed 2xx), that every replay
("Idempotent-Replayed: true") matches its key's original response byte for byte, and
that the endpoint ran the requests: no 5xx responses, no transport errors, no 4xx other
than the protocol's 409 (key in progress) and 422 (key used with another payload), and
no key without an execution or a replay. The first refused response is printed.

Key i is PREFIX+i (-key-prefix); with -key-format uuid, for a key declared with
format: uuid, it is a version 4 UUID derived from the prefix (random per run, or
-key-prefix: the same prefix gives the same UUIDs) and i.
{{key}} and {{i}} in -url, -d and -H values are replaced by the key and its 0-based index.

Exit status: 0 all good; 1 a 5xx, transport error, 4xx other than 409 and 422, key
never executed, mismatched replay, duplicate execution, or interrupted; 2 usage error.

Example:
  idemgen hammer -url http://localhost:8080/orders -n 1000 -c 50 -keys 100 \
    -H 'Content-Type: application/json' -d '{"ref":"{{key}}","qty":{{i}}}'
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

// options are the flags of Main that are not fields of Config.
type options struct {
	headers   headerFlags
	body      string
	jsonOut   bool
	quiet     bool
	keyPrefix string
}

// newFlags returns hammer's flag set, writing into cfg and o.
func newFlags(cfg *Config, o *options) *flag.FlagSet {
	fs := cliflag.NewFlagSet("idemgen hammer")
	fs.StringVar(&cfg.URL, "url", "", "endpoint `URL` (required)")
	fs.StringVar(&cfg.Method, "X", DefaultMethod, "HTTP `METHOD`, sent as typed")
	fs.Var(&o.headers, "H", "request header `'Name: value'` (repeatable)")
	fs.StringVar(&o.body, "d", "", "request `BODY`; @file reads it from file")
	fs.IntVar(&cfg.Requests, "n", DefaultRequests, "total `REQUESTS`")
	fs.IntVar(&cfg.Concurrency, "c", DefaultConcurrency, "maximum requests in flight, `CONCURRENCY`")
	fs.IntVar(&cfg.Keys, "keys", DefaultKeys, "number of distinct idempotency keys, `K`; each gets n/K duplicates")
	fs.StringVar(&cfg.KeyHeader, "key-header", DefaultKeyHeader, "idempotency key header `NAME`")
	fs.StringVar(&cfg.KeyFormat, "key-format", KeyFormatPrefix, "`FORMAT` of the keys: prefix (key i is PREFIX+i) or uuid (a version 4 UUID\nderived from PREFIX and i, for a key declared with format: uuid)")
	fs.StringVar(&o.keyPrefix, "key-prefix", "", "key `PREFIX`; key i is PREFIX+i, or with -key-format uuid the UUIDs' seed\n(default random per run)")
	fs.DurationVar(&cfg.Timeout, "timeout", DefaultTimeout, "per-request `TIMEOUT` (e.g. 30s), from release to end of body")
	fs.IntVar(&cfg.Retries, "retries", 0, "`N` retries per request with its key, as a well-behaved client would (idemclient:\ntransport errors, 409/429 after Retry-After, 5xx not stored); 0 sends each request once")
	fs.BoolVar(&o.jsonOut, "json", false, "print the summary as JSON")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines on stderr")
	return fs
}

// FlagSet returns the flags of `idemgen hammer`, for the idemgen command's hints about
// a flag given before the command.
func FlagSet() *flag.FlagSet {
	return newFlags(new(Config), new(options))
}

// Main runs `idemgen hammer`: args exclude the subcommand name. It writes help and the
// summary to stdout, progress and usage errors to stderr, and returns the exit status
// ([ExitOK], [ExitFail] or [ExitUsage]). Cancelling ctx stops the run and prints the
// partial summary.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		cfg Config
		o   options
	)
	fs := newFlags(&cfg, &o)
	rest, code, done := cliflag.Parse(fs, args, usageText, stdout, stderr)
	if done {
		return code
	}
	if msg := configure(fs, &cfg, &o, rest); msg != "" {
		fmt.Fprintln(stderr, cliflag.UsageLine(fs.Name(), msg))
		return ExitUsage
	}
	if !o.quiet {
		cfg.Progress = stderr
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, cliflag.UsageLine(fs.Name(), err.Error()))
		return ExitUsage
	}
	if o.jsonOut {
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

// configure checks the parsed flags and the positional arguments rest, and completes
// cfg from o; it returns what is wrong, or "".
func configure(fs *flag.FlagSet, cfg *Config, o *options, rest []string) string {
	if len(rest) > 0 {
		return fmt.Sprintf("unexpected argument %q", rest[0])
	}
	if cfg.URL == "" {
		return "-url is required"
	}
	// Zero would mean "default" to Run; on the command line it is a mistake.
	for _, f := range []struct {
		name string
		v    int
	}{{"n", cfg.Requests}, {"c", cfg.Concurrency}, {"keys", cfg.Keys}} {
		if f.v < 1 {
			return fmt.Sprintf("-%s must be at least 1, got %d", f.name, f.v)
		}
	}
	if cfg.Keys > cfg.Requests {
		return fmt.Sprintf("-keys %d must not exceed -n %d", cfg.Keys, cfg.Requests)
	}
	if cfg.Timeout <= 0 {
		return fmt.Sprintf("-timeout must be positive, got %s", cfg.Timeout)
	}
	if cfg.KeyHeader == "" {
		return "-key-header must not be empty"
	}
	if cfg.KeyFormat != KeyFormatPrefix && cfg.KeyFormat != KeyFormatUUID {
		return fmt.Sprintf("-key-format must be %s or %s, not %q", KeyFormatPrefix, KeyFormatUUID, cfg.KeyFormat)
	}
	if cfg.Method != "" && !validToken(cfg.Method) {
		return fmt.Sprintf("-X %q is not an HTTP method (a token: letters, digits and !#$%%&'*+-.^_`|~)", cfg.Method)
	}
	isSet := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { isSet[f.Name] = true })
	if isSet["key-prefix"] && o.keyPrefix == "" {
		return "-key-prefix must not be empty"
	}
	cfg.KeyPrefix = o.keyPrefix
	if isSet["d"] {
		if file, ok := strings.CutPrefix(o.body, "@"); ok {
			b, err := os.ReadFile(file)
			if err != nil {
				return fmt.Sprintf("-d: %v", err)
			}
			cfg.Body = b
		} else {
			cfg.Body = []byte(o.body)
		}
	}
	cfg.Header = o.headers.h
	return ""
}
