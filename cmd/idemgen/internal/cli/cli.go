// Package cli is the idemgen command: Main takes the arguments and the output streams and
// returns the exit status, so the whole command runs in-process in tests.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/idemgen/idemgen"
	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/internal/hammer"
)

// Exit statuses.
const (
	ExitOK    = 0 // success; with -check, the files are up to date
	ExitFail  = 1 // the spec has errors, generation failed, or -check found stale files
	ExitUsage = 2 // bad command, flags or arguments
)

const usage = `idemgen generates idempotent Go HTTP handlers from an OpenAPI 3 spec whose
operations carry x-idempotent markers.

Usage:
  idemgen generate [-check] [-base oapi-codegen|external] -package NAME -o DIR SPEC
  idemgen schema       print schema.sql (the idempotency_keys table) for your migrations
  idemgen hammer ...   load-test an idempotent endpoint (idemgen hammer -h)
  idemgen version      print the version
  idemgen help         print this text

generate writes DIR/oapi.gen.go (oapi-codegen: models, net/http server, strict server)
and DIR/idempotent.gen.go (IdempotentServerInterface, NewIdempotentStrictServer, one
idem.Policy per marked operation). DIR is created when missing.
  -check     write nothing; print a unified diff and exit 1 if the files in DIR differ
  -base      oapi-codegen (default): write both files; external: write only
             idempotent.gen.go, into a package that already has oapi-codegen's
             strict-server output for this spec
  -package   Go package name of the generated files
  -o         output directory

In //go:generate:
  //go:generate go tool idemgen generate -package api -o . openapi.yaml

Errors in the spec are printed as FILE:LINE:COL: message.

Exit status:
  0  success (with -check: the files are up to date)
  1  the spec has errors, generation failed, or -check found stale files
  2  usage error
`

// Main runs idemgen with args (without the program name).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		io.WriteString(stderr, usage)
		return ExitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "generate":
		return generate(rest, stdout, stderr)
	case "schema":
		if len(rest) > 0 {
			fmt.Fprintln(stderr, "idemgen schema: takes no arguments")
			return ExitUsage
		}
		io.WriteString(stdout, idemgen.Schema)
		return ExitOK
	case "version":
		fmt.Fprintf(stdout, "idemgen %s (oapi-codegen %s)\n", gen.Version(), gen.OapiCodegenVersion)
		return ExitOK
	case "hammer":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return hammer.Main(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		io.WriteString(stdout, usage)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "idemgen: unknown command %q\n\n%s", cmd, usage)
		return ExitUsage
	}
}

func generate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idemgen generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: idemgen generate [-check] [-base oapi-codegen|external] -package NAME -o DIR SPEC")
		fs.PrintDefaults()
	}
	check := fs.Bool("check", false, "write nothing; exit 1 with a diff when DIR's files are stale")
	base := fs.String("base", gen.BaseOapiCodegen, "oapi-codegen or external")
	pkg := fs.String("package", "", "Go package name (required)")
	dir := fs.String("o", "", "output directory (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	var problems []string
	if *pkg == "" {
		problems = append(problems, "-package is required")
	} else if !token.IsIdentifier(*pkg) {
		problems = append(problems, fmt.Sprintf("-package %q is not a Go identifier", *pkg))
	}
	if *dir == "" {
		problems = append(problems, "-o is required")
	}
	if *base != gen.BaseOapiCodegen && *base != gen.BaseExternal {
		problems = append(problems, fmt.Sprintf("-base must be %s or %s, not %q", gen.BaseOapiCodegen, gen.BaseExternal, *base))
	}
	if fs.NArg() != 1 {
		problems = append(problems, fmt.Sprintf("want one SPEC file, got %d arguments", fs.NArg()))
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "idemgen generate: %s\n", p)
		}
		fs.Usage()
		return ExitUsage
	}
	files, err := gen.Generate(gen.Options{
		Spec: fs.Arg(0), Package: *pkg, Dir: *dir, Base: *base,
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
	var fsys gen.FileSystem = gen.Dir(*dir)
	checker := &gen.Check{Dir: gen.Dir(*dir)}
	if *check {
		fsys = checker
	}
	if err := gen.Emit(fsys, files); err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return ExitFail
	}
	for _, c := range checker.Changes {
		p := filepath.Join(*dir, c.Name)
		switch {
		case c.New == nil:
			fmt.Fprintf(stderr, "idemgen: %s was generated by idemgen but would not be now (generate removes it)\n", p)
			continue
		case c.Old == nil:
			fmt.Fprintf(stderr, "idemgen: %s is missing\n", p)
		default:
			fmt.Fprintf(stderr, "idemgen: %s is stale\n", p)
		}
		unifiedDiff(stdout, p, c.Old, c.New)
	}
	if n := len(checker.Changes); n > 0 {
		fmt.Fprintf(stderr, "idemgen: %d generated file(s) out of date; run idemgen generate (go generate) and commit the result\n", n)
		return ExitFail
	}
	return ExitOK
}

// unifiedDiff writes the unified diff (3 lines of context, as diff -u and git) from old
// (on disk) to new (generated) of file p; `patch -p1` and `git apply` accept it.
func unifiedDiff(w io.Writer, p string, old, new []byte) {
	p = filepath.ToSlash(filepath.Clean(p))
	from, to := "a/"+p, "b/"+p
	if filepath.IsAbs(p) {
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
