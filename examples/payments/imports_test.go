package payments

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The service's packages import only what a service outside this repository can import:
// no internal package of idemgen (the demo's throwaway PostgreSQL lives in internal/devdb,
// used by cmd/demo and cmd/server only).
func TestServiceImportsNoInternalPackage(t *testing.T) {
	for _, dir := range []string{"service", "api", "db"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal") {
					t.Errorf("%s imports %s, which a service outside idemgen's repository cannot", f, path)
				}
			}
		}
	}
}
