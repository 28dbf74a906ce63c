package gen

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pipeline is the order of gen's steps (ARCHITECTURE.md): each package under internal/
// may import only the ones before it.
var pipeline = []string{"spec", "marker", "model", "base", "render", "genfs"}

// TestPipelineIsOneWay: no step imports a step after it, tests included. (An import back
// up the pipeline between two steps that import each other is a cycle the compiler
// refuses; this also catches one between steps that do not, such as genfs and render.)
func TestPipelineIsOneWay(t *testing.T) {
	const prefix = "github.com/idemgen/idemgen/gen/internal/"
	for i, step := range pipeline {
		files, err := filepath.Glob(filepath.Join("internal", step, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in internal/%s (%v)", step, err)
		}
		for _, file := range files {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				dep, ok := strings.CutPrefix(path, prefix)
				if !ok {
					continue
				}
				j := slices.Index(pipeline, dep)
				if j < 0 {
					t.Errorf("%s imports %s, which is not a step of the pipeline", file, path)
				} else if j >= i && !strings.HasSuffix(file, "_test.go") || j > i {
					t.Errorf("%s imports %s: %s comes after %s", file, path, dep, step)
				}
			}
		}
	}
}
