package gen_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/gen"
)

// TestContentRefJSON: a JSON spec's content $refs are resolved as a YAML one's (the JSON
// tree is re-encoded for kin-openapi): the contentref golden case, converted to JSON,
// gives the same base.
func TestContentRefJSON(t *testing.T) {
	src, err := os.ReadFile("testdata/golden/contentref/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(spec, data, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(gen.Options{Spec: spec, Package: "contentref", Version: "(devel)"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/golden/contentref/" + gen.BaseFile)
	if err != nil {
		t.Fatal(err)
	}
	got := files[0].Data
	// Only the Source line differs.
	got = bytes.Replace(got, []byte("// Source: "+spec), []byte("// Source: testdata/golden/contentref/openapi.yaml"), 1)
	if files[0].Name != gen.BaseFile || !bytes.Equal(got, want) {
		t.Errorf("the JSON spec's base differs from the YAML golden %s", gen.BaseFile)
	}
}
