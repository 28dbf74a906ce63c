package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/internal/cliflag"
)

const policiesHelp = `usage: idemgen policies [-json] [-overlay FILE]... [-against OLD [-against-overlay FILE]...] SPEC

Prints the idempotency policy of every operation SPEC marks, as the generated layer
enforces it, one row each: the operation, its method and path, where its key comes from
(ADDED: the header is not in the spec, idemgen adds it), whether the key is required (an
optional key lets a request without one run unprotected), lease, retention, timeout,
wait, isolation and store. It reads the spec and its markers only: it generates nothing
and needs no database. Spec errors are printed as FILE:LINE:COL: message (exit 1).

With -against OLD, prints instead what changed from the spec OLD to SPEC, for a reviewer:
an operation newly marked, one that lost its marker (RISK: its retries run again), and
per operation each field that changed (lease 30s -> 10s; RISK for a key made optional
and a retention shortened: a retry later than the new one runs again). Exit status 0
either way.

With -overlay FILE (repeatable, in order), the OpenAPI Overlay documents are applied to
SPEC as idemgen generate -overlay applies them, and to OLD too unless -against-overlay
names OLD's own (repeatable): a change to an overlay is reviewed as the same spec with
the old overlay against it with the new one.

Example:
  idemgen policies -overlay idempotency.overlay.yaml openapi.yaml
  idemgen policies -against old/openapi.yaml openapi.yaml
  idemgen policies -overlay new.overlay.yaml -against openapi.yaml -against-overlay old.overlay.yaml openapi.yaml
`

// policyJSON is one operation of policies' -json output; durations in Go's notation
// ("30s"), "" when none.
type policyJSON struct {
	Operation          string   `json:"operation"`
	Method             string   `json:"method"`
	Path               string   `json:"path"`
	Position           string   `json:"position"`
	Key                string   `json:"key"`
	KeyAdded           bool     `json:"key_added,omitempty"`
	KeyRules           []string `json:"key_rules,omitempty"`
	Required           bool     `json:"required"`
	Lease              string   `json:"lease"`
	Retention          string   `json:"retention"`
	Timeout            string   `json:"timeout,omitempty"`
	Wait               string   `json:"wait,omitempty"`
	Isolation          string   `json:"isolation,omitempty"`
	Store              string   `json:"store"`
	FingerprintHeaders []string `json:"fingerprint_headers,omitempty"`
	MarkedByMethod     bool     `json:"marked_by_method,omitempty"`
}

func newPoliciesFlags() (*flag.FlagSet, *bool, *string, *listFlag, *listFlag) {
	fs := newFlagSet("policies")
	asJSON := fs.Bool("json", false, "print the policies as a JSON array")
	against := fs.String("against", "", "the spec `OLD` to compare with: print what changed")
	overlays := &listFlag{}
	fs.Var(overlays, "overlay", overlayUsage+";\napplied to OLD too, unless -against-overlay is given")
	oldOverlays := &listFlag{}
	fs.Var(oldOverlays, "against-overlay", "Overlay `FILE` applied to OLD instead of the -overlay files (repeatable, in order)")
	return fs, asJSON, against, overlays, oldOverlays
}

func policies(args []string, stdout, stderr io.Writer) int {
	fs, asJSON, against, overlays, oldOverlays := newPoliciesFlags()
	rest, code, done := cliflag.Parse(fs, args, policiesHelp, stdout, stderr)
	if done {
		return code
	}
	if len(*oldOverlays) > 0 && *against == "" {
		return usageErrors(stderr, fs.Name(), "-against-overlay without -against OLD")
	}
	if len(rest) != 1 {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("want one SPEC, got %s", plural(len(rest), "argument")))
	}
	ps, ok := readPolicies(rest[0], *overlays, stderr)
	if !ok {
		return ExitFail
	}
	if *against != "" {
		forOld := *overlays
		if len(*oldOverlays) > 0 {
			forOld = *oldOverlays
		}
		old, ok := readPolicies(*against, forOld, stderr)
		if !ok {
			return ExitFail
		}
		printPolicyChanges(stdout, old, ps)
		return ExitOK
	}
	if *asJSON {
		out := make([]policyJSON, len(ps))
		for i, p := range ps {
			out[i] = toPolicyJSON(p)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return ExitOK
	}
	if len(ps) == 0 {
		fmt.Fprintf(stdout, "%s marks no operation %s\n", rest[0], gen.MarkerExt)
		return ExitOK
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "OPERATION\tMETHOD\tPATH\tKEY\tREQUIRED\tLEASE\tRETENTION\tTIMEOUT\tWAIT\tISOLATION\tSTORE")
	for _, p := range ps {
		key := p.KeySource
		if p.KeyAdded {
			key += " (ADDED)"
		}
		req := "no (unprotected without)"
		if p.Required {
			req = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Operation, p.Method, p.Path, key, req,
			dur(p.Lease), dur(p.Retention), orNone(dur(p.Timeout)), orNone(dur(p.Wait)), orDefault(p.Isolation), p.Store)
	}
	_ = w.Flush()
	return ExitOK
}

// readPolicies reads the policies of the spec at path with the overlays, printing its warnings and errors.
func readPolicies(path string, overlays []string, stderr io.Writer) ([]gen.Policy, bool) {
	ps, warnings, err := gen.PoliciesOverlaid(path, overlays)
	if err != nil {
		if located := gen.Errors(err); located != nil {
			for _, e := range located {
				fmt.Fprintln(stderr, e)
			}
		} else {
			fmt.Fprintf(stderr, "idemgen policies: %v\n", err)
		}
		return nil, false
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "idemgen: warning: "+w)
	}
	return ps, true
}

// printPolicyChanges prints what changed from old to cur, operations by name: the ones
// that lost their marker first (a risk), then the newly marked, then each changed field.
func printPolicyChanges(w io.Writer, old, cur []gen.Policy) {
	byName := func(ps []gen.Policy) map[string]gen.Policy {
		m := map[string]gen.Policy{}
		for _, p := range ps {
			m[p.Operation] = p
		}
		return m
	}
	o, c := byName(old), byName(cur)
	var lines []string
	for _, p := range old {
		if _, ok := c[p.Operation]; !ok {
			lines = append(lines, fmt.Sprintf("RISK %s (%s %s): no longer marked: its retries run again, each one a new execution", p.Operation, p.Method, p.Path))
		}
	}
	for _, p := range cur {
		if _, ok := o[p.Operation]; !ok {
			lines = append(lines, fmt.Sprintf("%s (%s %s): newly marked: key from %s, lease %s, retention %s", p.Operation, p.Method, p.Path, p.KeySource, dur(p.Lease), dur(p.Retention)))
		}
	}
	for _, p := range cur {
		q, ok := o[p.Operation]
		if !ok {
			continue
		}
		for _, ch := range policyDiff(toPolicyJSON(q), toPolicyJSON(p)) {
			lines = append(lines, fmt.Sprintf("%s (%s %s): %s", p.Operation, p.Method, p.Path, ch))
		}
	}
	if len(lines) == 0 {
		fmt.Fprintln(w, "no policy changed")
		return
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintf(w, "%s\n", plural(len(lines), "change"))
}

// policyDiff lists the fields that differ between a and b: "lease 30s -> 10s".
func policyDiff(a, b policyJSON) []string {
	var out []string
	add := func(name, x, y string) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %s -> %s", name, orNone(x), orNone(y)))
		}
	}
	add("key", a.Key, b.Key)
	add("key rules", strings.Join(a.KeyRules, ", "), strings.Join(b.KeyRules, ", "))
	if a.Required != b.Required {
		if b.Required {
			out = append(out, "key optional -> required (a request without one: 400)")
		} else {
			out = append(out, "RISK key required -> optional (a request without one runs unprotected)")
		}
	}
	add("lease", a.Lease, b.Lease)
	if shorter(b.Retention, a.Retention) {
		out = append(out, fmt.Sprintf("RISK retention %s -> %s (a retry later than %s runs again)", a.Retention, b.Retention, b.Retention))
	} else {
		add("retention", a.Retention, b.Retention)
	}
	if a.Timeout != "" && b.Timeout == "" {
		out = append(out, fmt.Sprintf("RISK timeout %s -> none (the business runs as long as the request lasts, and its retries wait or get 409 all that time)", a.Timeout))
	} else {
		add("timeout", a.Timeout, b.Timeout)
	}
	add("wait", a.Wait, b.Wait)
	add("isolation", orDefault(a.Isolation), orDefault(b.Isolation))
	add("store", a.Store, b.Store)
	add("fingerprint headers", strings.Join(a.FingerprintHeaders, ", "), strings.Join(b.FingerprintHeaders, ", "))
	return out
}

func toPolicyJSON(p gen.Policy) policyJSON {
	return policyJSON{
		Operation: p.Operation, Method: p.Method, Path: p.Path, Position: p.Pos.String(),
		Key: p.KeySource, KeyAdded: p.KeyAdded, KeyRules: slices.Clone(p.KeyRules), Required: p.Required,
		Lease: dur(p.Lease), Retention: dur(p.Retention), Timeout: dur(p.Timeout), Wait: dur(p.Wait),
		Isolation: p.Isolation, Store: p.Store, FingerprintHeaders: p.FingerprintHeaders, MarkedByMethod: p.ByMethod,
	}
}

// dur is d in Go's notation, "" for zero.
func dur(d time.Duration) string {
	if d == 0 {
		return ""
	}
	s := d.String() // 1h0m0s, 30m0s, 1m30s, 250ms
	s, _ = strings.CutSuffix(s, "m0s")
	if h, ok := strings.CutSuffix(s, "h0"); ok {
		return h + "h"
	}
	if strings.Contains(s, "h") || !strings.HasSuffix(s, "s") {
		return s + "m"
	}
	return s
}

// shorter reports whether the duration x (dur's notation) is set and shorter than y.
func shorter(x, y string) bool {
	dx, errx := time.ParseDuration(x)
	dy, erry := time.ParseDuration(y)
	return errx == nil && erry == nil && dx < dy
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orDefault(s string) string {
	if s == "" {
		return "database default"
	}
	return s
}
