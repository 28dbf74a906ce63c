package gen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/gen"
)

// TestExternalBaseClient: -base=external -client beside oapi-codegen's own output with its
// client writes the same client.gen.go as idemgen's own base; without oapi-codegen's
// client there, it is refused, naming what is missing.
func TestExternalBaseClient(t *testing.T) {
	const spec = "testdata/golden/bodykey/openapi.yaml" // a body key: idemgen adds no header
	own, err := gen.Generate(gen.Options{Spec: spec, Package: "bodykey", Client: true, Version: "(devel)"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		g     codegen.GenerateOptions
		only  bool
		files []string
	}{
		{"server and client", codegen.GenerateOptions{Models: true, StdHTTPServer: true, Strict: true, Client: true}, false, []string{gen.ClientFile, gen.SpecFile, gen.IdempotentFile}},
		{"client only", codegen.GenerateOptions{Models: true, Client: true}, true, []string{gen.ClientFile}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ExternalBaseFile), oapiCodegen(t, spec, "bodykey", c.g), 0o644); err != nil {
				t.Fatal(err)
			}
			files, err := gen.Generate(gen.Options{Spec: spec, Package: "bodykey", Base: gen.BaseExternal, Dir: dir, Client: true, ClientOnly: c.only, Version: "(devel)"})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(files), " "); got != strings.Join(c.files, " ") {
				t.Fatalf("files %s, want %v", got, c.files)
			}
			if !bytes.Equal(files[0].Data, fileNamed(t, own, gen.ClientFile)) {
				t.Errorf("%s beside an external base differs from the one beside idemgen's base", gen.ClientFile)
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ExternalBaseFile), oapiCodegen(t, spec, "bodykey", codegen.GenerateOptions{Models: true, StdHTTPServer: true, Strict: true}), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = gen.Generate(gen.Options{Spec: spec, Package: "bodykey", Base: gen.BaseExternal, Dir: dir, Client: true})
	if err == nil || !strings.Contains(err.Error(), "does not declare ClientWithResponses, CreatePaymentResponse") {
		t.Fatalf("err = %v, want one naming oapi-codegen's client types", err)
	}
}

// TestClientDeterministic generates the client case twice and compares the bytes.
func TestClientDeterministic(t *testing.T) {
	opts := gen.Options{Spec: clientSpec, Package: "client", Client: true}
	a, err := gen.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gen.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !bytes.Equal(a[i].Data, b[i].Data) {
			t.Errorf("%s: two runs differ", a[i].Name)
		}
	}
}

// TestClientOnlyRouter: a client-only package has no server, so no router.
func TestClientOnlyRouter(t *testing.T) {
	_, err := gen.Generate(gen.Options{Spec: clientSpec, Package: "x", ClientOnly: true, Router: gen.RouterChi})
	if err == nil || !strings.Contains(err.Error(), "no server to route") {
		t.Fatalf("err = %v", err)
	}
}

func fileNamed(t *testing.T, files []gen.File, name string) []byte {
	t.Helper()
	for _, f := range files {
		if f.Name == name {
			return f.Data
		}
	}
	t.Fatalf("no %s among %v", name, names(files))
	return nil
}
