package gen_test

import (
	"bytes"
	"go/format"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

// TestSpecFileIsFormatted: spec.gen.go is written in gofmt's layout by its template, not
// formatted afterwards: every golden one, and one whose spec has backquotes, CRLF line
// ends, a byte order mark and tabs, is unchanged by go/format.
func TestSpecFileIsFormatted(t *testing.T) {
	check := func(name string, data []byte) {
		t.Helper()
		out, err := format.Source(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(out, data) {
			t.Errorf("%s is not in gofmt's layout", name)
		}
	}
	for _, c := range goldenCases {
		p := filepath.Join("testdata", "golden", c, gen.SpecFile)
		data, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue // a client-only package
		}
		if err != nil {
			t.Fatal(err)
		}
		check(p, data)
	}
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	text := "\ufeffopenapi: \"3.0.3\"\r\ninfo: {title: \"`t`\", version: \"1\"}\r\npaths:\r\n  /x:\r\n    post:\r\n      operationId: x\r\n      description: \"``quoted``\\tand a tab\"\r\n      x-idempotent: true\r\n      responses:\r\n        '204': {description: \"`\"}\r\n"
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(gen.Options{Spec: spec, Package: "api"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name == gen.SpecFile {
			check("the backquoted spec's "+f.Name, f.Data)
		}
	}
}
