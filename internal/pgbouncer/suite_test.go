package pgbouncer_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/pgbouncer"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// TestSuitesBehindPgBouncer runs the protocol's own test suites, unchanged, with
// DATABASE_URL pointing at PgBouncer in transaction pooling mode (10 server connections
// per database): idem's (concurrency, crash and reclaim, fencing, retention, timeouts,
// retries), the generated handlers' end-to-end tests, and the payments service's tests.
// Each test binary creates its databases through the proxy (pgtest.NewDB) and runs every
// query through it. In exec mode the full suites run; in simple-protocol mode, the
// concurrency tests.
func TestSuitesBehindPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs other packages' tests with the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	b := pgbouncer.ForTest(t, pgtest.URL(t), pgbouncer.Options{PoolSize: 10})
	for _, run := range []struct {
		mode, filter string
		pkgs         []string
		must         []string // tests that must have run and passed
	}{
		// pkgs are directories from the repository's root: each is tested from its own
		// module (gen/internal/e2e and examples are modules of their own).
		{pgbouncer.ExecMode, "", []string{"idem", "gen/internal/e2e", "examples/payments/service"},
			[]string{"TestConcurrentDuplicatesOneKey", "TestManyKeysInterleaved", "TestConcurrentDuplicates", "TestDefaultIsolationDuplicates"}},
		{"simple_protocol", "Concurrent|ManyKeys|DefaultIsolation", []string{"idem", "gen/internal/e2e"},
			[]string{"TestConcurrentDuplicatesOneKey", "TestManyKeysInterleaved", "TestConcurrentDuplicates", "TestDefaultIsolationDuplicates"}},
	} {
		t.Run(run.mode, func(t *testing.T) {
			url, err := b.Via(pgtest.URL(t), run.mode)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"test", "-count=1", "-json"}
			if run.filter != "" {
				args = append(args, "-run", run.filter)
			}
			var out []byte
			var runErr error
			for _, pkg := range run.pkgs {
				cmd := exec.Command(goCmd, append(args, "./"+pkg)...)
				cmd.Dir = filepath.Join("..", "..")
				if mod := moduleOf(pkg); mod != "." {
					cmd.Dir, cmd.Args[len(cmd.Args)-1] = filepath.Join(cmd.Dir, mod), "./"+strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
				}
				cmd.Env = append(withoutEnv("DATABASE_URL"), "DATABASE_URL="+url)
				o, err := cmd.Output()
				out = append(out, o...)
				if err != nil && runErr == nil {
					runErr = fmt.Errorf("go test %s: %w", pkg, err)
				}
			}
			passed, failed := map[string]bool{}, map[string][]string{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			output := map[string][]string{}
			top := 0
			for sc.Scan() {
				var ev struct {
					Action, Package, Test, Output string
				}
				if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
					continue
				}
				name := ev.Package + "." + ev.Test
				switch ev.Action {
				case "output":
					output[name] = append(output[name], ev.Output)
				case "pass":
					passed[name] = true
					if !strings.Contains(ev.Test, "/") {
						top++
					}
				case "fail":
					failed[name] = output[name]
				}
			}
			names := make([]string, 0, len(failed))
			for n := range failed {
				names = append(names, n)
			}
			sort.Strings(names)
			for i, name := range names {
				if i == 3 {
					t.Errorf("behind PgBouncer (%s): %d more failed: %v", run.mode, len(names)-3, names[3:])
					break
				}
				t.Errorf("behind PgBouncer (%s): %s failed:\n%s", run.mode, name, strings.Join(tailLines(failed[name], 15), ""))
			}
			if runErr != nil && len(failed) == 0 {
				var stderr string
				if ee, ok := runErr.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				t.Errorf("go test: %v\n%s", runErr, stderr)
			}
			for _, must := range run.must {
				found := false
				for name := range passed {
					if strings.HasSuffix(name, "."+must) {
						found = true
					}
				}
				if !found {
					t.Errorf("%s did not pass behind PgBouncer (%s)", must, run.mode)
				}
			}
			t.Logf("RESULT behind PgBouncer, default_query_exec_mode=%s: %d tests passed (%d with subtests) in %s, %d failed %v", run.mode, top, len(passed), strings.Join(run.pkgs, " "), len(failed), names)
		})
	}
}

// moduleOf returns the directory of the module that holds the package directory pkg
// (both from the repository's root): the nearest directory with a go.mod.
func moduleOf(pkg string) string {
	root := filepath.Join("..", "..")
	for dir := pkg; dir != "." && dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(root, dir, "go.mod")); err == nil {
			return dir
		}
	}
	return "."
}

func withoutEnv(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			env = append(env, kv)
		}
	}
	return env
}

func tailLines(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
