package cli

import (
	"flag"
	"fmt"
	"go/token"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/internal/cliflag"
)

const generateHelp = `usage: idemgen generate [-check] [-overlay FILE]... [-router std-http|chi|echo|gin] [-base oapi-codegen|external] [-client [-server=false]] -package NAME -o DIR SPEC

Writes DIR/oapi.gen.go (oapi-codegen: models, the router's server, strict server),
DIR/idempotent.gen.go (IdempotentServerInterface, NewIdempotentStrictServer, one
idem.Policy per marked operation) and DIR/spec.gen.go (the spec, embedded: OpenAPI()
returns it parsed, for idemvalidate) from the OpenAPI 3 file SPEC. DIR is created when
missing. With -check nothing is written: a unified diff is printed and the exit status
is 1 when the files in DIR differ from what would be generated. The diff's paths are
relative to the current directory (under go generate, the package's): "git apply" run
there applies it (with --unsafe-paths when DIR is outside it; from another directory,
git apply --directory=PATH, PATH leading from there to this one).

The idempotent layer is the same for every router: it implements oapi-codegen's
StrictServerInterface. With -base external, DIR already has oapi-codegen's output for
SPEC (models, a std-http, chi, echo or gin server, strict-server), and the router is read
from it.

With -client, oapi-codegen's client goes into oapi.gen.go too (sharing the models), and
DIR/client.gen.go has IdempotentClient: for every marked operation a method that puts
the idempotency key where the spec declares it and retries with the same key and body
(idemclient); the other operations are oapi-codegen's client's, sent once. With
-server=false the package is the client only (models and client, no idempotent.gen.go).
With -base external, DIR's oapi-codegen output must have the client (client: true).

With -overlay FILE (repeatable, applied in order), SPEC is first changed by the OpenAPI
Overlay document FILE (1.0 or 1.1, applied by github.com/speakeasy-api/openapi/overlay,
the library oapi-codegen applies its own output-options.overlay with): the markers of a
spec you do not own can live in a file of your own. Everything is generated from the
overlaid document, spec.gen.go included, and -check compares with it. A mistake in what
an overlay wrote is reported at its FILE:LINE:COL in the overlay; an action whose target
selects nothing is an error. For example, overlay.yaml:

  overlay: 1.0.0
  info: {title: idempotency markers, version: 1.0.0}
  actions:
    - target: $.paths['/pets'].post
      update:
        x-idempotent: {required: true, lease: 10s}

and, in a Go file beside openapi.yaml:
  //go:generate go tool idemgen generate -overlay overlay.yaml -package api -o api openapi.yaml

idemgen annotate SPEC lists the candidates for a marker and writes such an overlay
(-overlay-out FILE).

Example:
  idemgen generate -package api -o api openapi.yaml
  idemgen generate -overlay idempotency.overlay.yaml -package api -o api vendor-openapi.yaml
  idemgen generate -router chi -package api -o api openapi.yaml
  idemgen generate -client -server=false -package paymentsapi -o paymentsapi openapi.yaml
  idemgen generate openapi.yaml --package api --o api -check
`

// generateFlags are the flags of generate.
type generateFlags struct {
	check, client, server  *bool
	router, base, pkg, dir *string
	overlays               *listFlag
}

func newGenerateFlags() (*flag.FlagSet, generateFlags) {
	fs := newFlagSet("generate")
	overlays := &listFlag{}
	fs.Var(overlays, "overlay", overlayUsage)
	return fs, generateFlags{
		overlays: overlays,
		check:    fs.Bool("check", false, "write nothing; print a diff and exit 1 when DIR's files are stale"),
		client:   fs.Bool("client", false, "also write oapi-codegen's client and client.gen.go: IdempotentClient, whose methods\nfor the marked operations retry with one idempotency key per call"),
		server:   fs.Bool("server", true, "write the server side (the router's server, strict server, idempotent.gen.go);\n-server=false (with -client) writes a client-only package"),
		router:   fs.String("router", "", "`ROUTER` of the base: std-http (net/http, the default), chi, echo or gin; with\n-base external, read from DIR (when given, it must agree)"),
		base:     fs.String("base", gen.BaseOapiCodegen, "`BASE`: oapi-codegen writes every file; external writes only idempotent.gen.go and spec.gen.go,\ninto a package that already has oapi-codegen's strict-server output for this spec"),
		pkg:      fs.String("package", "", "Go package `NAME` of the generated files (required)"),
		dir:      fs.String("o", "", "output `DIR` (required)"),
	}
}

// andList joins items as English does: "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func generate(args []string, stdout, stderr io.Writer) int {
	fs, f := newGenerateFlags()
	specs, code, done := cliflag.Parse(fs, args, generateHelp, stdout, stderr, specHint)
	if done {
		return code
	}
	var problems, missing []string
	if *f.pkg == "" {
		missing = append(missing, "-package")
	} else if !token.IsIdentifier(*f.pkg) {
		problems = append(problems, fmt.Sprintf("-package %q is not a Go identifier", *f.pkg))
	}
	if *f.dir == "" {
		missing = append(missing, "-o")
	}
	if len(specs) == 0 {
		missing = append(missing, "the SPEC file")
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("missing %s (idemgen generate -package NAME -o DIR SPEC)", andList(missing)))
	}
	if *f.base != gen.BaseOapiCodegen && *f.base != gen.BaseExternal {
		problems = append(problems, fmt.Sprintf("-base must be %s or %s, not %q", gen.BaseOapiCodegen, gen.BaseExternal, *f.base))
	}
	if *f.router != "" && !slices.Contains(gen.Routers, *f.router) {
		problems = append(problems, fmt.Sprintf("-router must be one of %s, not %q", strings.Join(gen.Routers, ", "), *f.router))
	}
	if !*f.server && !*f.client {
		problems = append(problems, "-server=false leaves nothing to generate without -client")
	}
	if !*f.server && *f.router != "" {
		problems = append(problems, fmt.Sprintf("-router %s with -server=false: a client-only package has no server to route", *f.router))
	}
	if len(specs) > 1 {
		problems = append(problems, fmt.Sprintf("want one SPEC file, got %d arguments", len(specs)))
	}
	if len(problems) > 0 {
		return usageErrors(stderr, fs.Name(), problems...)
	}
	files, err := gen.Generate(gen.Options{
		Spec: specs[0], Overlays: *f.overlays, Package: *f.pkg, Dir: *f.dir, Base: *f.base, Router: *f.router,
		Client: *f.client, ClientOnly: !*f.server,
		Warnf: func(format string, args ...any) { fmt.Fprintf(stderr, "idemgen: warning: "+format+"\n", args...) },
	})
	if err != nil {
		if located := gen.Errors(err); located != nil {
			for _, e := range located {
				fmt.Fprintln(stderr, e)
			}
		} else {
			fmt.Fprintf(stderr, "idemgen: %v\n", err)
		}
		return ExitFail
	}
	var fsys gen.FileSystem = gen.Dir(*f.dir)
	checker := &gen.Check{Dir: gen.Dir(*f.dir)}
	if *f.check {
		fsys = checker
	}
	if err := gen.Emit(fsys, files); err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return ExitFail
	}
	return report(*f.dir, checker.Changes, stdout, stderr)
}

// report prints what -check found: a diff per stale file to stdout, a line per file to
// stderr. Without -check there is nothing to report.
func report(dir string, changes []gen.Change, stdout, stderr io.Writer) int {
	outside := false
	for _, c := range changes {
		p := filepath.Join(dir, c.Name)
		switch {
		case c.New == nil:
			fmt.Fprintf(stderr, "idemgen: %s was generated by idemgen but would not be now (generate removes it)\n", p)
			continue
		case c.Old == nil:
			fmt.Fprintf(stderr, "idemgen: %s is missing\n", p)
		default:
			fmt.Fprintf(stderr, "idemgen: %s is stale\n", p)
		}
		rel := diffPath(p)
		outside = outside || strings.HasPrefix(rel, "../")
		unifiedDiff(stdout, rel, c.Old, c.New)
	}
	if outside {
		fmt.Fprintf(stderr, "idemgen: %s is outside the current directory: apply the diff here with git apply --unsafe-paths\n", dir)
	}
	if n := len(changes); n > 0 {
		fmt.Fprintf(stderr, "idemgen: %d generated file(s) out of date; run idemgen generate (go generate) and commit the result\n", n)
		return ExitFail
	}
	return ExitOK
}

// diffPath returns the path the diff gives file p: relative to the current directory
// and slash-separated, so that `git apply` (and `patch -p1`) run there find the file,
// inside a git repository (git prefixes the subdirectory) or outside one. A file outside
// the current directory gets a path that climbs out ("../api/x.go"), which git applies
// with --unsafe-paths. When no relative path exists (another volume) it stays absolute.
func diffPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.ToSlash(filepath.Clean(p))
	}
	wd, err := os.Getwd()
	if err != nil {
		return filepath.ToSlash(abs)
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(rel)
}

// unifiedDiff writes the unified diff (3 lines of context, as diff -u and git) from old
// (on disk) to new (generated) of file p (a slash-separated path, see diffPath), with
// git's a/ and b/ prefixes.
func unifiedDiff(w io.Writer, p string, old, new []byte) {
	from, to := "a/"+p, "b/"+p
	if path.IsAbs(p) || filepath.IsAbs(p) {
		from, to = p, p
	}
	if old == nil {
		from = "/dev/null"
	}
	_ = difflib.WriteUnifiedDiff(w, difflib.UnifiedDiff{
		A: diffLines(old), B: diffLines(new),
		FromFile: from, ToFile: to, Context: 3,
	})
}

// diffLines splits b into lines that keep their "\n". Unlike difflib.SplitLines it adds no
// line to an empty file or after a final newline (either makes a hunk git apply rejects),
// and it marks a last line without a newline the way diff -u does.
func diffLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	if last := len(lines) - 1; lines[last] == "" {
		lines = lines[:last]
	} else {
		lines[last] += "\n\\ No newline at end of file\n"
	}
	return lines
}
