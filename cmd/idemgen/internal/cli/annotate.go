package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/internal/cliflag"
)

const annotateHelp = `usage: idemgen annotate [-overlay FILE]... [-overlay-out FILE | -w] [-only OP,...] SPEC

Prints, for every operation of SPEC, what idemgen makes of it: MARKED is yes (its
x-idempotent, or x-idempotent-defaults.methods: "by methods"), "opted out"
(x-idempotent: false, or left unmarked by the defaults) or no; KEY and STORE are the
marked operation's, or, for a candidate, the ones x-idempotent: true would give it (ADDED:
the header is not in the spec, idemgen adds it; "declared": the spec's own header or
body property); CANDIDATE says why an unmarked operation is one: a POST, PUT or PATCH, or
an operation that declares a key (a DELETE with an Idempotency-Key header), or why marking
it would not generate ("cannot be marked: ..."). The generator's warnings follow, each
FILE:LINE:COL, under the operation they are about (a candidate's: those marking it would
give), then those about the spec as a whole. It reads the spec only: nothing is
generated, no database is needed.

With -overlay-out FILE, writes an OpenAPI Overlay 1.0 document that marks the candidates
(every one that can be marked, or those named with -only, by operationId or "POST /path")
x-idempotent: true, one action each, for idemgen generate -overlay FILE: the markers of a
spec you do not own live in a file of yours, to review and refine (a lease, a required
key) before committing it. -overlay applies existing overlays first, as generate does:
an operation they mark is no candidate.

With -w, writes the markers into SPEC itself instead: x-idempotent: true on a line of its
own before each chosen operation's first key, with its indentation ("x-idempotent": true,
in JSON). Nothing else of the file changes (formatting, comments, key order, line
endings): its diff has insertions only. An operation written in flow style cannot take a
line and is an error. -w does not combine with -overlay.

An operation whose path item is a $ref within SPEC (components/pathItems, another path)
is marked where the $ref points, by -w and -overlay-out alike. One whose path item is in
another file is listed, located at its $ref, as a candidate that cannot be marked:
idemgen reads markers in SPEC only, which is all an overlay changes too.

Example:
  idemgen annotate openapi.yaml
  idemgen annotate -overlay-out idempotency.overlay.yaml openapi.yaml
  idemgen annotate -only addPet,updatePet -overlay-out idempotency.overlay.yaml openapi.yaml
  idemgen generate -overlay idempotency.overlay.yaml -package api -o api openapi.yaml
  idemgen annotate -w -only addPet openapi.yaml
`

func newAnnotateFlags() (*flag.FlagSet, *listFlag, *string, *string, *bool) {
	fs := newFlagSet("annotate")
	overlays := &listFlag{}
	fs.Var(overlays, "overlay", overlayUsage)
	out := fs.String("overlay-out", "", "write an overlay marking the candidates to `FILE`")
	only := fs.String("only", "", "with -overlay-out or -w, mark only these `OPS` (comma-separated operationIds or \"POST /path\")")
	write := fs.Bool("w", false, "write the markers into SPEC itself, as added lines only")
	return fs, overlays, out, only, write
}

func annotate(args []string, stdout, stderr io.Writer) int {
	fs, overlays, outFile, only, write := newAnnotateFlags()
	rest, code, done := cliflag.Parse(fs, args, annotateHelp, stdout, stderr)
	if done {
		return code
	}
	if len(rest) != 1 {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("want one SPEC, got %s", plural(len(rest), "argument")))
	}
	if *only != "" && *outFile == "" && !*write {
		return usageErrors(stderr, fs.Name(), "-only without -overlay-out FILE or -w")
	}
	if *write && *outFile != "" {
		return usageErrors(stderr, fs.Name(), "-w and -overlay-out: the markers go into the spec or into an overlay, not both")
	}
	if *write && len(*overlays) > 0 {
		return usageErrors(stderr, fs.Name(), "-w with -overlay: -w writes into the spec file, which holds no overlay's changes")
	}
	anns, warnings, err := gen.Annotate(rest[0], *overlays)
	if err != nil {
		if located := gen.Errors(err); located != nil {
			for _, e := range located {
				fmt.Fprintln(stderr, e)
			}
		} else {
			fmt.Fprintf(stderr, "idemgen annotate: %v\n", err)
		}
		return ExitFail
	}
	printAnnotations(stdout, anns)
	printAnnotateWarnings(stdout, anns, warnings)
	if *outFile == "" && !*write {
		return ExitOK
	}
	var chosen []gen.Annotation
	if *only != "" {
		names := strings.Split(*only, ",")
		for _, n := range names {
			n = strings.TrimSpace(n)
			i := slices.IndexFunc(anns, func(a gen.Annotation) bool {
				return a.Operation == n || strings.EqualFold(a.Method+" "+a.Path, n)
			})
			switch {
			case i < 0:
				return usageErrors(stderr, fs.Name(), fmt.Sprintf("-only: %s names no operation of %s", n, rest[0]))
			case anns[i].Marked:
				return usageErrors(stderr, fs.Name(), fmt.Sprintf("-only: %s is marked already", n))
			case anns[i].Problem != "":
				fmt.Fprintf(stderr, "idemgen annotate: %s cannot be marked: %s\n", n, anns[i].Problem)
				return ExitFail
			case anns[i].Policy == nil:
				return usageErrors(stderr, fs.Name(), fmt.Sprintf("-only: %s (%s %s) cannot be marked x-idempotent", n, anns[i].Method, anns[i].Path))
			}
			chosen = append(chosen, anns[i])
		}
	} else {
		for _, a := range anns {
			if a.Candidate && a.Problem == "" {
				chosen = append(chosen, a)
			}
		}
	}
	if len(chosen) == 0 {
		fmt.Fprintln(stderr, "idemgen annotate: no operation to mark: nothing written")
		return ExitFail
	}
	if *write {
		text, err := gen.InsertMarkers(rest[0], chosen)
		if err == nil {
			err = os.WriteFile(rest[0], text, 0o644)
		}
		if err != nil {
			if located := gen.Errors(err); located != nil {
				for _, e := range located {
					fmt.Fprintln(stderr, e)
				}
			} else {
				fmt.Fprintf(stderr, "idemgen annotate: %v\n", err)
			}
			return ExitFail
		}
		fmt.Fprintf(stderr, "idemgen annotate: %s: %s marked %s (lines added only)\n", rest[0], plural(len(chosen), "operation"), gen.MarkerExt)
		return ExitOK
	}
	if err := os.WriteFile(*outFile, gen.CandidateOverlay("idempotency markers for "+rest[0], chosen), 0o644); err != nil {
		fmt.Fprintf(stderr, "idemgen annotate: %v\n", err)
		return ExitFail
	}
	fmt.Fprintf(stderr, "idemgen annotate: %s marks %s; generate with: idemgen generate -overlay %s ... %s\n", *outFile, plural(len(chosen), "operation"), *outFile, rest[0])
	return ExitOK
}

// printAnnotations prints the annotations as a table, and a summary.
func printAnnotations(w io.Writer, anns []gen.Annotation) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tMETHOD\tPATH\tMARKED\tKEY\tSTORE\tCANDIDATE")
	marked, cands := 0, 0
	for _, a := range anns {
		m := "no"
		switch {
		case a.Marked && a.Policy.ByMethod:
			m = "by methods"
		case a.Marked:
			m = "yes"
		case a.OptedOut:
			m = "opted out"
		}
		key, store := "-", "-"
		if a.Policy != nil && (a.Marked || a.Candidate) {
			key, store = a.Policy.KeySource, a.Policy.Store
			if a.Policy.KeyAdded {
				key += " (ADDED)"
			} else {
				key += " (declared)"
			}
			if !a.Policy.Required {
				key += ", optional"
			}
		}
		cand := "-"
		switch {
		case a.Candidate && a.Problem != "":
			cand = "cannot be marked: " + strings.ReplaceAll(a.Problem, "\n", "; ")
		case a.Candidate:
			cand = "yes: " + a.Why
			cands++
		}
		if a.Marked {
			marked++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Operation, a.Method, a.Path, m, key, store, cand)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%s, %d marked, %s (idemgen annotate -overlay-out FILE writes an overlay that marks them)\n", plural(len(anns), "operation"), marked, plural(cands, "candidate"))
}

// printAnnotateWarnings prints the warnings under the operation each is about, in the
// table's order (a candidate's are those marking it would give), then the spec's own.
func printAnnotateWarnings(w io.Writer, anns []gen.Annotation, specWarnings []string) {
	n := len(specWarnings)
	for _, a := range anns {
		n += len(a.Warnings)
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", plural(n, "warning"))
	for _, a := range anns {
		if len(a.Warnings) == 0 {
			continue
		}
		head := a.Method + " " + a.Path
		if a.Operation != head {
			head = a.Operation + " (" + head + ")"
		}
		if !a.Marked && a.Candidate {
			head += ", if marked " + gen.MarkerExt + ": true"
		}
		fmt.Fprintf(w, "  %s:\n", head)
		// The operation is named above: its name is left out of the messages that start with it.
		redundant := ": " + gen.MarkerExt + ": " + a.Method + " " + a.Path + ": "
		for _, l := range a.Warnings {
			fmt.Fprintf(w, "    %s\n", strings.Replace(l, redundant, ": ", 1))
		}
	}
	if len(specWarnings) > 0 {
		fmt.Fprintln(w, "  about the spec as a whole:")
		for _, l := range specWarnings {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}
