package gen_test

import (
	"bytes"
	"testing"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/util"

	"github.com/idemgen/idemgen/gen"
)

// TestGenerateAfterResolveTypeNameCollisions: a process that runs oapi-codegen itself
// with resolve-type-name-collisions (a tool generating an external base and then the
// idempotent layer, or a test package doing both) and then gen.Generate gets the same
// files as a process that ran gen.Generate alone. oapi-codegen keeps the resolved names
// in its package state and resets them only once its Generate passes the streaming
// patterns; idemgen's collision renaming reads names through oapi-codegen's type
// functions before its own run, so names left behind make it see no collision where
// its run has one.
func TestGenerateAfterResolveTypeNameCollisions(t *testing.T) {
	const spec = "testdata/codegenstate/collisions.yaml"
	opts := gen.Options{Spec: spec, Package: "pets"}
	want, err := gen.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := util.LoadSwagger(spec)
	if err != nil {
		t.Fatal(err)
	}
	v := gen.OapiCodegenVersion
	if _, err := codegen.Generate(doc, codegen.Configuration{
		PackageName:          "pets",
		Generate:             codegen.GenerateOptions{Models: true},
		OutputOptions:        codegen.OutputOptions{ResolveTypeNameCollisions: true},
		NoVCSVersionOverride: &v,
	}); err != nil {
		t.Fatal(err)
	}
	got, err := gen.Generate(opts)
	if err != nil {
		t.Fatalf("after oapi-codegen with resolve-type-name-collisions: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d files, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Errorf("%s differs from a run in a fresh process", want[i].Name)
		}
	}
}
