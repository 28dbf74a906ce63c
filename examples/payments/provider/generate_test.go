package provider

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

// The committed code in api/ is what idemgen generates from openapi.yaml today, with the
// options of the go:generate line in doc.go.
func TestGeneratedCodeIsFresh(t *testing.T) {
	files, err := gen.Generate(gen.Options{Spec: "openapi.yaml", Package: "api", Dir: "api", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.Join("api", f.Name)
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(old, f.Data) {
			t.Errorf("%s is stale: run `go -C examples generate ./payments/provider`", p)
		}
	}
}
