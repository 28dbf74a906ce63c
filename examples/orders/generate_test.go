package orders

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

// The committed handlers in api/ are what idemgen generates from openapi.yaml today, with
// the options of the go:generate line in doc.go: `go test` fails when they are stale, like
// `idemgen generate -check` in CI.
func TestGeneratedCodeIsFresh(t *testing.T) {
	files, err := gen.Generate(gen.Options{Spec: "openapi.yaml", Package: "api", Dir: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Errorf("%d generated files, want 3 (oapi.gen.go, spec.gen.go, idempotent.gen.go)", len(files))
	}
	for _, f := range files {
		p := filepath.Join("api", f.Name)
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(old, f.Data) {
			t.Errorf("%s is stale: run `go -C examples generate ./orders` (or `idemgen generate -check -package api -o api openapi.yaml` for a diff)", p)
		}
	}
}
