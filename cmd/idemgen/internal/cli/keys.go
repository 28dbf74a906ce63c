package cli

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/cliflag"
)

const keysHelp = `usage: idemgen keys show [-database-url URL] [-json] SCOPE KEY
       idemgen keys held [-database-url URL] [-json] [-stale-after D]

Looks into the idempotency_keys table and the claims held now, for the people who
answer "was my request executed?".

keys show prints one key's row: its status (completed, or processing for a claim left by
idemgen v1), operation, fingerprint, times (created, completed, expires), the recorded
answer's status, headers and body size (not the body), and whether a request holds the
key now, with the claim's lock value (idem.LockID(scope, key): the lock_id that keys
held lists while a request holds the key). SCOPE is the scope your service's scope
function returns ("" when it has none); KEY is the key as stored: an sf-string key
unquoted, a uuid key in lowercase. Exit status 1 when the key has no row.

keys held lists the claims held now (requests inside their transaction, on every
replica), oldest first: the holder's backend pid (pg_terminate_backend(pid) ends it and
frees its key at once, rolling its work back), state, how long held and idle, and
STALE for those held past -stale-after (default 30s, idem's default lease). It cannot
name the key: a claim is a transaction-scoped lock on a 64-bit hash of scope and key
(idem.LockID(scope, key), the LOCK column), the key reaches the database only with the
completion, in the same commit, and a hash does not give the key back. To ask about one
key, run keys show SCOPE KEY ("held now"). On a Citus cluster it lists the claims held on
every node, with the node each holder entered through (NODE) and its global pid (GPID:
pg_terminate_backend(GPID) from any node).

With -json the output is one JSON object (show) or array (held).
The connection string is -database-url, else the DATABASE_URL environment variable.
`

// keysFlags are the flags of keys show and keys held.
type keysFlags struct {
	dbURL      *string
	json       *bool
	staleAfter *time.Duration
}

func newKeysFlags() (*flag.FlagSet, keysFlags) {
	fs := newFlagSet("keys")
	return fs, keysFlags{
		dbURL:      fs.String("database-url", "", "PostgreSQL connection `URL` (default $DATABASE_URL)"),
		json:       fs.Bool("json", false, "print JSON"),
		staleAfter: fs.Duration("stale-after", idem.DefaultLease, "keys held: mark claims held longer than `D` as stale"),
	}
}

func keys(args []string, stdout, stderr io.Writer) int {
	fs, f := newKeysFlags()
	rest, code, done := cliflag.Parse(fs, args, keysHelp, stdout, stderr)
	if done {
		return code
	}
	if len(rest) == 0 {
		return usageErrors(stderr, fs.Name(), "want a subcommand: show SCOPE KEY, or held")
	}
	sub, rest := rest[0], rest[1:]
	switch {
	case sub == "show" && len(rest) != 2:
		return usageErrors(stderr, "idemgen keys show", fmt.Sprintf(`want SCOPE and KEY (SCOPE "" when the service sets no scope), got %s`, plural(len(rest), "argument")))
	case sub == "held" && len(rest) != 0:
		return usageErrors(stderr, "idemgen keys held", fmt.Sprintf("unexpected argument %q", rest[0]))
	case sub != "show" && sub != "held":
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("unknown subcommand %q (want show or held)", sub))
	}
	if *f.dbURL == "" {
		*f.dbURL = os.Getenv("DATABASE_URL")
	}
	if *f.dbURL == "" {
		return usageErrors(stderr, fs.Name(), "no database: set -database-url or DATABASE_URL")
	}
	if *f.staleAfter <= 0 {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("-stale-after must be positive, got %s", *f.staleAfter))
	}
	cfg, err := pgxpool.ParseConfig(*f.dbURL)
	if err != nil {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("database URL: %v", err))
	}
	cfg.MaxConns = 1
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen keys: %v\n", err)
		return ExitFail
	}
	defer pool.Close()
	store := idem.NewStore(pool, idem.WithStaleAfter(*f.staleAfter))
	if sub == "held" {
		return keysHeld(ctx, store, *f.json, stdout, stderr)
	}
	return keysShow(ctx, store, rest[0], rest[1], *f.json, stdout, stderr)
}

// keyJSON is keys show's -json output.
type keyJSON struct {
	Scope             string      `json:"scope"`
	Key               string      `json:"key"`
	Found             bool        `json:"found"`
	Held              bool        `json:"held"`
	LockID            int64       `json:"lock_id"` // idem.LockID(scope, key), as keys held shows it
	Status            string      `json:"status,omitempty"`
	Operation         string      `json:"operation,omitempty"`
	Fingerprint       string      `json:"fingerprint,omitempty"` // hex
	ResponseStatus    int         `json:"response_status,omitempty"`
	ResponseHeaders   [][2]string `json:"response_headers,omitempty"`
	ResponseBodyBytes int64       `json:"response_body_bytes"`
	CreatedAt         *time.Time  `json:"created_at,omitempty"`
	CompletedAt       *time.Time  `json:"completed_at,omitempty"`
	ExpiresAt         *time.Time  `json:"expires_at,omitempty"`
	LeasedUntil       *time.Time  `json:"leased_until,omitempty"`
	Expired           bool        `json:"expired"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func keysShow(ctx context.Context, store *idem.Store, scope, key string, asJSON bool, stdout, stderr io.Writer) int {
	st, err := store.Key(ctx, scope, key)
	found := err == nil
	if err != nil && !errors.Is(err, idem.ErrKeyNotFound) {
		fmt.Fprintf(stderr, "idemgen keys show: %v\n", err)
		return ExitFail
	}
	if asJSON {
		out := keyJSON{Scope: scope, Key: key, Found: found, Held: st.Held, LockID: idem.LockID(scope, key)}
		if found {
			out.Status, out.Operation, out.Fingerprint = st.Status, st.Operation, hex.EncodeToString(st.Fingerprint)
			out.ResponseStatus, out.ResponseHeaders, out.ResponseBodyBytes = st.ResponseStatus, st.ResponseHeaders, st.ResponseBodyBytes
			out.CreatedAt, out.CompletedAt, out.ExpiresAt = timePtr(st.CreatedAt), timePtr(st.CompletedAt), timePtr(st.ExpiresAt)
			if st.Status == "processing" {
				out.LeasedUntil = timePtr(st.LeasedUntil)
			}
			out.Expired = st.Expired
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	} else if !found {
		held := ""
		if st.Held {
			held = "; a request with it is running now"
		}
		fmt.Fprintf(stdout, "scope %q key %q (lock %d): no row%s\n", scope, key, idem.LockID(scope, key), held)
	} else {
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		line := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
		line("scope", fmt.Sprintf("%q", scope))
		line("key", fmt.Sprintf("%q", key))
		status := st.Status
		if st.Expired {
			status += " (expired: the next request with this key runs afresh)"
		}
		line("status", status)
		line("held now", fmt.Sprint(st.Held))
		line("lock", fmt.Sprint(idem.LockID(scope, key)))
		line("operation", st.Operation)
		line("fingerprint", hex.EncodeToString(st.Fingerprint))
		line("created", st.CreatedAt.UTC().Format(time.RFC3339Nano))
		if !st.CompletedAt.IsZero() {
			line("completed", st.CompletedAt.UTC().Format(time.RFC3339Nano))
		}
		line("expires", st.ExpiresAt.UTC().Format(time.RFC3339Nano))
		if st.Status == "processing" {
			line("leased until", st.LeasedUntil.UTC().Format(time.RFC3339Nano))
		}
		if st.ResponseStatus != 0 {
			line("response status", fmt.Sprint(st.ResponseStatus))
			var hs []string
			for _, h := range st.ResponseHeaders {
				hs = append(hs, h[0]+": "+h[1])
			}
			line("response headers", strings.Join(hs, "; "))
			line("response body", fmt.Sprintf("%d bytes", st.ResponseBodyBytes))
		}
		_ = w.Flush()
	}
	if !found {
		return ExitFail
	}
	return ExitOK
}

// heldJSON is one claim of keys held's -json output.
type heldJSON struct {
	LockID          int64     `json:"lock_id"`
	PID             int       `json:"pid"`
	Node            int       `json:"node,omitempty"`       // Citus: the entry node's id
	GlobalPID       int64     `json:"global_pid,omitempty"` // Citus: the cluster-wide pid
	State           string    `json:"state"`
	ApplicationName string    `json:"application_name"`
	ClientAddr      string    `json:"client_addr"`
	Since           time.Time `json:"since"`
	HeldSeconds     float64   `json:"held_seconds"`
	IdleSeconds     float64   `json:"idle_seconds"`
	Stale           bool      `json:"stale"`
}

func keysHeld(ctx context.Context, store *idem.Store, asJSON bool, stdout, stderr io.Writer) int {
	held, err := store.HeldClaims(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen keys held: %v\n", err)
		return ExitFail
	}
	if asJSON {
		out := make([]heldJSON, len(held))
		for i, h := range held {
			out[i] = heldJSON{LockID: h.LockID, PID: h.PID, Node: h.Node, GlobalPID: h.GlobalPID, State: h.State, ApplicationName: h.ApplicationName,
				ClientAddr: h.ClientAddr, Since: h.Since.UTC(), HeldSeconds: h.Held.Seconds(), IdleSeconds: h.Idle.Seconds(), Stale: h.Stale}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return ExitOK
	}
	if len(held) == 0 {
		fmt.Fprintln(stdout, "no claims held")
		return ExitOK
	}
	// On a Citus cluster the holders are sessions on several nodes: NODE is the one a
	// holder entered through (its pid is that node's), GPID its cluster-wide pid.
	cluster := held[0].Node != 0
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if cluster {
		fmt.Fprint(w, "NODE\tGPID\t")
	}
	fmt.Fprintln(w, "PID\tHELD\tIDLE\tSTATE\tLOCK\tCLIENT\t")
	stale := 0
	for _, h := range held {
		mark := ""
		if h.Stale {
			mark, stale = "STALE", stale+1
		}
		client := h.ApplicationName
		if h.ClientAddr != "" {
			client = strings.TrimSpace(client + " " + h.ClientAddr)
		}
		if cluster {
			fmt.Fprintf(w, "%d\t%d\t", h.Node, h.GlobalPID)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", h.PID, h.Held.Round(time.Millisecond), h.Idle.Round(time.Millisecond),
			h.State, h.LockID, client, mark)
	}
	_ = w.Flush()
	fmt.Fprintf(stdout, "%s held, %d stale\n", plural(len(held), "claim"), stale)
	return ExitOK
}

// plural is n and noun, with an s unless n is 1: "1 claim", "2 claims".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
