package gen

import (
	"bytes"
	"testing"
)

// TestGenerateRunsNoCommand: generation is the same without the go command on PATH (x/tools'
// imports.Process, once used for the idempotent layer, ran `go env` on every call).
func TestGenerateRunsNoCommand(t *testing.T) {
	want, err := Generate(Options{Spec: "testdata/golden/keyspec/openapi.yaml", Package: "keyspec", Version: "(devel)"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	got, err := Generate(Options{Spec: "testdata/golden/keyspec/openapi.yaml", Package: "keyspec", Version: "(devel)"})
	if err != nil {
		t.Fatalf("without go on PATH: %v", err)
	}
	for i := range want {
		if !bytes.Equal(got[i].Data, want[i].Data) {
			t.Errorf("%s differs without go on PATH", got[i].Name)
		}
	}
}
