package idemgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxConsumerModules bounds what a service inherits by requiring idemgen: the modules
// `go list -m all` lists in a new service that uses the generated code's imports, the
// Prometheus adapter, request validation and `go tool idemgen`. The same stack without
// idemgen (pgx, oapi-codegen's runtime, kin-openapi, prometheus) lists about 92.
// Test-only and tool-only dependencies live in the repository's other modules
// (examples, gen/internal/e2e, migrations, tools, idem/idemotel); a dependency added
// here is one every service pays for.
const maxConsumerModules = 100

// consumerMain is the service's code: the imports of idemgen's generated code, of the
// README's wiring and of its tests (idemtest).
const consumerMain = `package main

import (
	_ "github.com/idemgen/idemgen/idem"
	_ "github.com/idemgen/idemgen/idem/idemclient"
	_ "github.com/idemgen/idemgen/idem/idemprom"
	_ "github.com/idemgen/idemgen/idem/idemvalidate"
	_ "github.com/idemgen/idemgen/idemtest"
	_ "github.com/oapi-codegen/runtime"
)

func main() {}
`

func TestConsumerModuleIsLight(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: resolves a throwaway consumer module's dependencies")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/orders\n\ngo 1.26.0\n\n" +
		"require github.com/idemgen/idemgen v0.0.0\n\n" +
		"replace github.com/idemgen/idemgen => " + filepath.ToSlash(root) + "\n\n" +
		"tool github.com/idemgen/idemgen/cmd/idemgen\n"
	write(t, filepath.Join(dir, "go.mod"), gomod)
	write(t, filepath.Join(dir, "main.go"), consumerMain)
	goIn(t, dir, "mod", "tidy")
	goIn(t, dir, "build", "./...")
	out := goIn(t, dir, "list", "-m", "all")
	mods := strings.Split(strings.TrimSpace(out), "\n")
	n := len(mods) - 1 // the first line is the consumer itself
	t.Logf("a consumer module lists %d modules besides itself", n)
	if n > maxConsumerModules {
		t.Errorf("a service requiring idemgen lists %d modules (at most %d): a test or tool dependency leaked into the root go.mod? `go mod why -m MODULE` in the root says which package needs it.\n%s",
			n, maxConsumerModules, out)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func goIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go %s: %s", strings.Join(args, " "), msg)
	}
	return string(out)
}
