// Package corpus generates the real public specs of ../shared/specs (the two at its top
// and the corpus/ folder) with every POST marked through x-idempotent-defaults, with
// -client (server and client side in one package), compiles
// what it generated, and checks that -check finds it up to date. The specs are read from
// ../shared/specs beside the repository; they are never copied into it.
package corpus

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/gen"
)

// specsDir is ../shared/specs relative to the repository root.
var specsDir = filepath.Join("..", "..", "..", "..", "shared", "specs")

// invalid pins the specs that are genuinely invalid to the located errors they must get.
var invalid = map[string][]string{
	// A path parameter its path template does not have.
	"recurly.yaml": {
		`recurly.yaml:8621:17: parameter "site_id" (in: path) of PUT /invoices/{invoice_id}/apply_credit_balance is not in the path template`,
	},
}

const markAll = "x-idempotent-defaults:\n  methods: [post]\n"

func TestCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and compiles a dozen large specs")
	}
	specs := findSpecs(t)
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp("testdata", "build")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })

	var pkgs, generated []string
	for _, spec := range specs {
		name := filepath.Base(spec)
		marked := filepath.Join(tmp, name)
		if err := os.WriteFile(marked, withDefaults(t, spec), 0o644); err != nil {
			t.Fatal(err)
		}
		pkg := packageName(name)
		dir := filepath.Join(tmp, pkg)
		start := time.Now()
		// With -client: the client side (oapi-codegen's client, IdempotentClient) compiles
		// for every spec too.
		files, err := gen.Generate(gen.Options{Spec: marked, Package: pkg, Dir: dir, Client: true})
		t.Logf("%s: generated in %v", name, time.Since(start).Round(time.Millisecond))
		if want, ok := invalid[name]; ok {
			checkPinned(t, name, tmp, err, want)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := gen.Write(dir, files); err != nil {
			t.Fatal(err)
		}
		check := &gen.Check{Dir: gen.Dir(dir)}
		if err := gen.Emit(check, files); err != nil || len(check.Changes) > 0 {
			t.Errorf("%s: -check after generate: %v, %d changes", name, err, len(check.Changes))
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(dir))
		generated = append(generated, name)
	}
	start := time.Now()
	compiled := build(t, pkgs, generated)
	t.Logf("go build of %d packages: %v", len(pkgs), time.Since(start).Round(time.Second))
	want := len(specs) - len(invalid)
	t.Logf("%d/%d specs generate and compile (%d pinned invalid: %s)", compiled, want, len(invalid), strings.Join(sortedKeys(invalid), ", "))
	if compiled < want {
		t.Errorf("%d/%d specs generate and compile", compiled, want)
	}
}

// findSpecs lists the specs, or skips (fails under CI=true) when ../shared is not there.
func findSpecs(t testing.TB) []string {
	var specs []string
	for _, pattern := range []string{"*.yaml", "*.json", "corpus/*.yaml", "corpus/*.json"} {
		m, _ := filepath.Glob(filepath.Join(specsDir, pattern))
		specs = append(specs, m...)
	}
	if len(specs) == 0 {
		msg := fmt.Sprintf("no specs in %s: the corpus lives in ../shared/specs beside the repository", specsDir)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sort.Strings(specs)
	return specs
}

// withDefaults returns the spec with x-idempotent-defaults marking every POST: for JSON
// after the opening brace (so lines stay), for YAML as the last root key.
func withDefaults(t testing.TB, spec string) []byte {
	data, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(spec, ".json") {
		i := bytes.IndexByte(data, '{')
		return append(append(append([]byte{}, data[:i+1]...), `"x-idempotent-defaults":{"methods":["post"]},`...), data[i+1:]...)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	return append(data, markAll...)
}

var notIdent = regexp.MustCompile(`[^a-z0-9]`)

func packageName(file string) string {
	n := notIdent.ReplaceAllString(strings.ToLower(strings.TrimSuffix(file, filepath.Ext(file))), "")
	return "spec" + n
}

func checkPinned(t *testing.T, name, tmp string, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: generated, want its located errors", name)
		return
	}
	got := strings.ReplaceAll(err.Error(), tmp+string(filepath.Separator), "")
	if got != strings.Join(want, "\n") {
		t.Errorf("%s: errors\n%s\nwant\n%s", name, got, strings.Join(want, "\n"))
	}
	if gen.Errors(err) == nil {
		t.Errorf("%s: errors are not located", name)
	}
}

// build compiles the generated packages in one go command and returns how many built.
func build(t *testing.T, pkgs, names []string) int {
	if len(pkgs) == 0 {
		return 0
	}
	out, err := exec.Command("go", append([]string{"build"}, pkgs...)...).CombinedOutput()
	if err == nil {
		return len(pkgs)
	}
	failed := 0
	for i, p := range pkgs {
		if bytes.Contains(out, []byte(strings.TrimPrefix(p, "./")+"/")) {
			failed++
			t.Errorf("%s does not compile", names[i])
		}
	}
	t.Errorf("go build: %v\n%s", err, truncate(out, 4000))
	return len(pkgs) - max(failed, 1)
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "\n..."...)
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}
