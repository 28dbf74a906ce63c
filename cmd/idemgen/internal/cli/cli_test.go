package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen"
)

const golden = "../../../../gen/testdata/golden/"

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return code, o.String(), e.String()
}

func TestGenerateThenCheck(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "api") // created by generate
	spec := golden + "truemarker/openapi.yaml"
	if code, _, stderr := run("generate", "-package", "truemarker", "-o", dir, spec); code != ExitOK {
		t.Fatalf("generate: exit %d: %s", code, stderr)
	}
	for _, name := range []string{"oapi.gen.go", "idempotent.gen.go"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(golden + "truemarker/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the golden file", name)
		}
	}

	// -check right after generate: clean.
	if code, stdout, stderr := run("generate", "-check", "-package", "truemarker", "-o", dir, spec); code != ExitOK || stdout != "" || stderr != "" {
		t.Fatalf("check after generate: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// A hand edit: -check fails with a unified diff and leaves the file alone.
	p := filepath.Join(dir, "idempotent.gen.go")
	orig, _ := os.ReadFile(p)
	edited := bytes.Replace(orig, []byte("Lease:       30 * time.Second"), []byte("Lease:       time.Minute"), 1)
	if bytes.Equal(edited, orig) {
		t.Fatal("test edit did not apply")
	}
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run("generate", "-check", "-package", "truemarker", "-o", dir, spec)
	if code != ExitFail {
		t.Fatalf("check of an edited file: exit %d, want %d", code, ExitFail)
	}
	wd, _ := os.Getwd()
	rel, _ := filepath.Rel(wd, p) // the diff's paths are relative to the current directory
	for _, want := range []string{"--- a/" + filepath.ToSlash(rel) + "\n", "+++ b/" + filepath.ToSlash(rel) + "\n", "@@ -", "-\tLease:       time.Minute,", "+\tLease:       30 * time.Second,"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "idempotent.gen.go is stale") {
		t.Errorf("stderr: %s", stderr)
	}
	if now, _ := os.ReadFile(p); !bytes.Equal(now, edited) {
		t.Error("-check wrote the file")
	}

	// A missing file is stale too.
	os.Remove(filepath.Join(dir, "oapi.gen.go"))
	if code, _, stderr := run("generate", "-check", "-package", "truemarker", "-o", dir, spec); code != ExitFail || !strings.Contains(stderr, "oapi.gen.go is missing") {
		t.Errorf("check with a missing file: exit %d, stderr %s", code, stderr)
	}
}

func TestExternalBase(t *testing.T) {
	dir := t.TempDir()
	spec := golden + "bodykey/openapi.yaml"
	code, _, stderr := run("generate", "-base", "external", "-package", "bodykey", "-o", dir, spec)
	if code != ExitFail || !strings.Contains(stderr, "does not declare") || !strings.Contains(stderr, "-base=oapi-codegen") {
		t.Fatalf("external base into an empty dir: exit %d, stderr %s", code, stderr)
	}
	base, _ := os.ReadFile(golden + "bodykey/oapi.gen.go")
	os.WriteFile(filepath.Join(dir, "server.go"), base, 0o644)
	if code, _, stderr := run("generate", "-base", "external", "-package", "bodykey", "-o", dir, spec); code != ExitOK {
		t.Fatalf("external base: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "oapi.gen.go")); err == nil {
		t.Error("-base=external wrote oapi.gen.go")
	}
	if _, err := os.Stat(filepath.Join(dir, "idempotent.gen.go")); err != nil {
		t.Error(err)
	}
}

// -router writes the router's base: the same files as the golden case.
func TestRouter(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := run("generate", "-router", "chi", "-package", "chirouter", "-o", dir, golden+"routers.yaml"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"oapi.gen.go", "idempotent.gen.go"} {
		got, _ := os.ReadFile(filepath.Join(dir, name))
		want, _ := os.ReadFile(golden + "chirouter/" + name)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %schirouter/%s", name, golden, name)
		}
	}
}

// With -base external the router is read from the package's oapi-codegen output; a
// -router that contradicts it is an error.
func TestExternalRouter(t *testing.T) {
	dir := t.TempDir()
	base, _ := os.ReadFile(golden + "ginexternal/api.gen.go")
	os.WriteFile(filepath.Join(dir, "api.gen.go"), base, 0o644)
	code, _, stderr := run("generate", "-base", "external", "-router", "chi", "-package", "ginexternal", "-o", dir, golden+"routers.yaml")
	if want := "-router chi, but the package's oapi-codegen output has the gin server (it declares GinServerOptions)"; code != ExitFail || !strings.Contains(stderr, want) {
		t.Errorf("contradicting -router: exit %d, stderr %s", code, stderr)
	}
	if code, _, stderr := run("generate", "-base", "external", "-package", "ginexternal", "-o", dir, golden+"routers.yaml"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "idempotent.gen.go"))
	want, _ := os.ReadFile(golden + "ginexternal/idempotent.gen.go")
	if !bytes.Equal(got, want) {
		t.Error("idempotent.gen.go differs from the ginexternal golden case (its doc comment shows gin's wiring)")
	}
}

func TestSpecErrorsAreLocated(t *testing.T) {
	spec := "../../../../gen/testdata/errors/lease-zero.yaml"
	code, stdout, stderr := run("generate", "-package", "x", "-o", t.TempDir(), spec)
	want := spec + `:8:16: x-idempotent.lease: "0s" must be positive` + "\n"
	if code != ExitFail || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, want)
	}
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string // in stdout+stderr
	}{
		{nil, ExitUsage, "Usage:"},
		{[]string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{[]string{"help"}, ExitOK, "Exit status:"},
		{[]string{"generate", "-o", "x", "spec.yaml"}, ExitUsage, "missing -package"},
		{[]string{"generate", "-package", "p", "spec.yaml"}, ExitUsage, "missing -o"},
		{[]string{"generate", "-package", "p", "-o", "x"}, ExitUsage, "missing the SPEC file"},
		{[]string{"generate", "-base", "chi", "-package", "p", "-o", "x", "s.yaml"}, ExitUsage, "-base must be oapi-codegen or external"},
		{[]string{"generate", "-router", "fiber", "-package", "p", "-o", "x", "s.yaml"}, ExitUsage, `-router must be one of std-http, chi, echo, gin, not "fiber"`},
		{[]string{"generate", "-bogus"}, ExitUsage, "unknown flag -bogus"},
		{[]string{"generate", "-package", "p", "-o", t.TempDir(), "does-not-exist.yaml"}, ExitFail, "no such file"},
		{[]string{"generate", "-package", "not-an-ident", "-o", t.TempDir(), golden + "truemarker/openapi.yaml"}, ExitUsage, "not a Go identifier"},
		{[]string{"schema", "extra"}, ExitUsage, "takes no arguments"},
		{[]string{"hammer"}, ExitUsage, "idemgen hammer"},
		{[]string{"generate", "-o"}, ExitUsage, "run 'idemgen generate -help' for usage"},
	} {
		code, stdout, stderr := run(c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, c.out) {
			t.Errorf("idemgen %s: exit %d (want %d), output lacks %q:\n%s%s", strings.Join(c.args, " "), code, c.code, c.out, stdout, stderr)
		}
	}
}

func TestSchema(t *testing.T) {
	code, stdout, _ := run("schema")
	if code != ExitOK || stdout != idemgen.Schema {
		t.Errorf("schema: exit %d, output differs from schema.sql", code)
	}
	code, stdout, _ = run("schema", "-citus")
	if code != ExitOK || stdout != idemgen.CitusSchema || !strings.Contains(stdout, "create_distributed_table('idempotency_keys', 'scope')") {
		t.Errorf("schema -citus: exit %d, output differs from schema_citus.sql", code)
	}
}

// The -check diff applies with git apply / patch: a missing file is a pure addition, and a
// final newline adds no line.
func TestDiffApplies(t *testing.T) {
	var b bytes.Buffer
	unifiedDiff(&b, "api/x.go", nil, []byte("a\nb\n"))
	if want := "--- /dev/null\n+++ b/api/x.go\n@@ -0,0 +1,2 @@\n+a\n+b\n"; b.String() != want {
		t.Errorf("new file:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	unifiedDiff(&b, "api/x.go", []byte("a\nc"), []byte("a\nb\n"))
	if want := "--- a/api/x.go\n+++ b/api/x.go\n@@ -1,2 +1,2 @@\n a\n-c\n\\ No newline at end of file\n+b\n"; b.String() != want {
		t.Errorf("edit:\n%s\nwant\n%s", b.String(), want)
	}
}

// Switching to -base=external: -check reports idemgen's own oapi.gen.go as a leftover, and
// generate removes it. A base file written by oapi-codegen itself is never touched.
func TestLeftoverBaseFile(t *testing.T) {
	dir := t.TempDir()
	spec := golden + "bodykey/openapi.yaml"
	if code, _, stderr := run("generate", "-package", "bodykey", "-o", dir, spec); code != ExitOK {
		t.Fatalf("generate: exit %d: %s", code, stderr)
	}
	// The package still has oapi-codegen's types (under another name, as a service would).
	base, err := os.ReadFile(filepath.Join(dir, "oapi.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	own := bytes.Replace(base, []byte("// Code generated by idemgen"), []byte("// Code generated by oapi-codegen (was idemgen)"), 1)
	if err := os.WriteFile(filepath.Join(dir, "server.gen.go"), own, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run("generate", "-check", "-base", "external", "-package", "bodykey", "-o", dir, spec)
	if code != ExitFail || !strings.Contains(stderr, "oapi.gen.go was generated by idemgen but would not be now") {
		t.Fatalf("-check with a leftover: exit %d, stderr %s", code, stderr)
	}
	if code, _, stderr := run("generate", "-base", "external", "-package", "bodykey", "-o", dir, spec); code != ExitOK {
		t.Fatalf("generate: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "oapi.gen.go")); !os.IsNotExist(err) {
		t.Fatalf("the leftover oapi.gen.go is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "server.gen.go")); err != nil {
		t.Fatalf("the service's own base file was touched: %v", err)
	}
	if code, _, stderr := run("generate", "-check", "-base", "external", "-package", "bodykey", "-o", dir, spec); code != ExitOK {
		t.Fatalf("-check after generate: exit %d: %s", code, stderr)
	}
}

// The help's //go:generate line is the README's: one layout (api/ beside openapi.yaml).
func TestHelpGoGenerateLineIsTheREADMEs(t *testing.T) {
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ := run("help")
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "//go:generate go tool idemgen") {
			line = strings.TrimSpace(l)
		}
	}
	if line == "" || !strings.Contains(string(readme), line+"\n") {
		t.Errorf("the help's go:generate line %q is not the README's", line)
	}
}
