package gen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// checkExternalBase checks, for -base=external, that the Go files already in dir declare
// what the idempotent layer refers to: StrictServerInterface and each operation's request
// and response object types, in package pkg. It returns the package's router (see
// externalRouter; router is Options.Router).
func checkExternalBase(dir, pkg, router string, ops []codegen.OperationDefinition) (string, error) {
	hint := fmt.Sprintf("-base=%s needs oapi-codegen's output (models, a server, strict-server) for this spec in package %s in %s; generate it there first, or use -base=%s", BaseExternal, pkg, dir, BaseOapiCodegen)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("%v; %s", err, hint)
	}
	decls := map[string]bool{}
	var pkgs []string
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == IdempotentFile {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return "", err
		}
		if f.Name.Name != pkg {
			pkgs = append(pkgs, f.Name.Name+" ("+n+")")
			continue
		}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					decls[s.(*ast.TypeSpec).Name.Name] = true
				}
			}
		}
	}
	var missing []string
	want := []string{"StrictServerInterface"}
	for _, o := range ops {
		if !o.IsAlias {
			want = append(want, o.OperationId+"RequestObject", o.OperationId+"ResponseObject")
		}
	}
	for _, w := range want {
		if !decls[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) == 0 {
		return externalRouter(router, decls)
	}
	sort.Strings(missing)
	if len(missing) > 5 {
		missing = append(missing[:5], fmt.Sprintf("and %d more", len(missing)-5))
	}
	msg := fmt.Sprintf("%s does not declare %s; %s", dir, strings.Join(missing, ", "), hint)
	if len(pkgs) > 0 {
		msg += fmt.Sprintf(" (files of other packages there: %s)", strings.Join(pkgs, ", "))
	}
	return "", fmt.Errorf("%s", msg)
}
