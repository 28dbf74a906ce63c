package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClient: -client writes the golden client case's three files, -client -server=false
// the client-only case's two; the combinations that generate nothing sensible are usage
// errors.
func TestClient(t *testing.T) {
	for _, c := range []struct {
		pkg   string
		args  []string
		files []string
	}{
		{"client", []string{"-client"}, []string{"oapi.gen.go", "client.gen.go", "idempotent.gen.go"}},
		{"clientonly", []string{"-client", "-server=false"}, []string{"oapi.gen.go", "client.gen.go"}},
	} {
		dir := t.TempDir()
		args := append(append([]string{"generate"}, c.args...), "-package", c.pkg, "-o", dir, golden+"client.yaml")
		if code, _, stderr := run(args...); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != len(c.files) {
			t.Errorf("%v wrote %d files, want %v", args, len(entries), c.files)
		}
		for _, name := range c.files {
			got, _ := os.ReadFile(filepath.Join(dir, name))
			want, _ := os.ReadFile(golden + c.pkg + "/" + name)
			if len(got) == 0 || !bytes.Equal(got, want) {
				t.Errorf("%v: %s differs from %s%s/%s", args, name, golden, c.pkg, name)
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-server=false"}, "-server=false leaves nothing to generate without -client"},
		{[]string{"-client", "-server=false", "-router", "chi"}, "-router chi with -server=false: a client-only package has no server to route"},
	} {
		args := append(append([]string{"generate"}, c.args...), "-package", "p", "-o", t.TempDir(), golden+"client.yaml")
		code, _, stderr := run(args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want usage error %q", args, code, stderr, c.want)
		}
	}
}
