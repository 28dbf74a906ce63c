package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The -check diff applies with `git apply` run where -check ran (under go generate, the
// package directory), inside a git repository or not, whatever the spelling of -o: relative,
// absolute, or outside the current directory (then with --unsafe-paths, as stderr says).
func TestCheckDiffAppliesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed (apt-get install git)")
	}
	spec, err := filepath.Abs(golden + "truemarker/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []bool{true, false} {
		root := t.TempDir()
		if repo {
			if out, err := exec.Command(git, "init", "-q", root).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v\n%s", err, out)
			}
		}
		pkg := filepath.Join(root, "pkg")
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Chdir(pkg)
		for _, o := range []string{"api", "./api", filepath.Join(pkg, "api"), "../pkg/api", filepath.Join(root, "other")} {
			name := map[bool]string{true: "in a git repository", false: "outside a repository"}[repo] + ", -o " + o
			apiDir := o
			if !filepath.IsAbs(apiDir) {
				apiDir = filepath.Join(pkg, o)
			}
			os.RemoveAll(apiDir)
			if code, _, stderr := run("generate", "-package", "api", "-o", o, spec); code != ExitOK {
				t.Fatalf("%s: generate: exit %d: %s", name, code, stderr)
			}
			stale(t, apiDir)
			code, diff, stderr := run("generate", "-check", "-package", "api", "-o", o, spec)
			if code != ExitFail {
				t.Fatalf("%s: -check of stale files: exit %d: %s", name, code, stderr)
			}
			args := []string{"apply"}
			outside := strings.Contains(stderr, "git apply --unsafe-paths")
			if outside {
				args = append(args, "--unsafe-paths")
			}
			if wantOutside := !strings.HasPrefix(apiDir, pkg+string(filepath.Separator)); outside != wantOutside {
				t.Errorf("%s: stderr names --unsafe-paths: %v, want %v:\n%s", name, outside, wantOutside, stderr)
			}
			cmd := exec.Command(git, append(args, "-")...)
			cmd.Stdin = strings.NewReader(diff)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: git %s of the -check diff, from the directory of -check: %v\n%s\n%s", name, strings.Join(args, " "), err, out, diff)
				continue
			}
			if code, _, stderr := run("generate", "-check", "-package", "api", "-o", o, spec); code != ExitOK {
				t.Errorf("%s: -check after git apply: exit %d: %s", name, code, stderr)
			}
		}
	}
}

// stale edits one generated file in dir and removes the other, as a hand edit and a
// forgotten generate would.
func stale(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "idempotent.gen.go")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "Lease:       30 * time.Second", "Lease:       time.Minute", 1)
	if edited == string(b) {
		t.Fatal("test edit did not apply")
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "oapi.gen.go")); err != nil {
		t.Fatal(err)
	}
}
