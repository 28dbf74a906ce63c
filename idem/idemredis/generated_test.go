package idemredis

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goldenRedis are gen's golden cases whose code imports this package: the root module,
// which holds them, does not depend on this one, so they are compiled here.
var goldenRedis = []string{"redisstore", "redisonly"}

// TestGeneratedCodeCompiles builds gen's store: redis golden packages (go vet:
// type-checked and vetted) in a throwaway module that requires idemgen and this module.
func TestGeneratedCodeCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds generated packages with the go command")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/stars\n\ngo 1.26.0\n\n" +
		"require (\n\tgithub.com/idemgen/idemgen v0.0.0\n\tgithub.com/idemgen/idemgen/idem/idemredis v0.0.0\n)\n\n" +
		"replace github.com/idemgen/idemgen => " + filepath.ToSlash(root) + "\n\n" +
		"replace github.com/idemgen/idemgen/idem/idemredis => " + filepath.ToSlash(filepath.Join(root, "idem", "idemredis")) + "\n"
	write(t, filepath.Join(dir, "go.mod"), gomod)
	for _, c := range goldenRedis {
		src := filepath.Join(root, "gen", "testdata", "golden", c)
		files, err := filepath.Glob(filepath.Join(src, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no generated files in %s (%v)", src, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, c, filepath.Base(f)), string(b))
		}
	}
	goIn(t, dir, "mod", "tidy")
	goIn(t, dir, "vet", "./...")
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func goIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
