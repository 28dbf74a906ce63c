package orders

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

// The committed api/ is what idemgen generates from openapi.yaml today (the go:generate
// line of orders.go): go test fails when it is stale.
func TestGeneratedCodeIsFresh(t *testing.T) {
	files, err := gen.Generate(gen.Options{Spec: "openapi.yaml", Package: "api", Dir: "api"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.Join("api", f.Name)
		old, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(old, f.Data) {
			t.Errorf("%s is stale (%v): run go generate ./idemtest/internal/orders", p, err)
		}
	}
}
