package gen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// OapiCodegenVersion is the oapi-codegen release that generates the base.
const OapiCodegenVersion = "v2.8.2"

// codegenMu serialises oapi-codegen: its pkg/codegen keeps the options, the spec and the
// name normaliser in package-level state that each Generate call overwrites.
var codegenMu sync.Mutex

// loadDoc loads the spec with kin-openapi. Each call returns a fresh document: oapi-codegen
// rewrites the one it is given (operation ids, pruning).
func loadDoc(path string, data []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IncludeOrigin = true
	loader.IsExternalRefsAllowed = true
	// Local files only: a generator whose output depends on the network is not reproducible.
	loader.ReadFromURIFunc = func(l *openapi3.Loader, u *url.URL) ([]byte, error) {
		if u.Scheme != "" && u.Scheme != "file" {
			return nil, fmt.Errorf("remote $ref %s: idemgen reads local files only", u)
		}
		return openapi3.ReadFromFile(l, u)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return loader.LoadFromDataWithPath(data, &url.URL{Path: filepath.ToSlash(abs)})
}

// component is a named entry of components/* that oapi-codegen turns into a Go type.
type component struct {
	section, name string
	goName        string
	isRef         bool
	ext           *map[string]any // where to put x-go-name; nil when it cannot be renamed
}

func components(doc *openapi3.T) []*component {
	if doc.Components == nil {
		return nil
	}
	var out []*component
	add := func(section, name, ref string, ext *map[string]any) {
		c := &component{section: section, name: name, isRef: ref != ""}
		c.goName = codegen.SchemaNameToTypeName(name)
		if ext != nil && !c.isRef {
			c.ext = ext
			if v, ok := (*ext)["x-go-name"].(string); ok && v != "" {
				c.goName = v
			}
		}
		out = append(out, c)
	}
	cs := doc.Components
	for _, n := range sortedKeys(cs.Schemas) {
		if r := cs.Schemas[n]; r != nil && r.Value != nil {
			add("schemas", n, r.Ref, &r.Value.Extensions)
		}
	}
	for _, n := range sortedKeys(cs.Parameters) {
		if r := cs.Parameters[n]; r != nil && r.Value != nil {
			add("parameters", n, r.Ref, &r.Value.Extensions)
		}
	}
	for _, n := range sortedKeys(cs.Responses) {
		if r := cs.Responses[n]; r != nil && r.Value != nil {
			add("responses", n, r.Ref, &r.Value.Extensions)
		}
	}
	for _, n := range sortedKeys(cs.RequestBodies) {
		if r := cs.RequestBodies[n]; r != nil && r.Value != nil {
			add("requestBodies", n, r.Ref, &r.Value.Extensions)
		}
	}
	return out
}

// renames maps "section/name" to the Go type name idemgen assigns with x-go-name.
type renames map[string]string

func (r renames) apply(comps []*component) {
	for _, c := range comps {
		if n, ok := r[c.section+"/"+c.name]; ok && c.ext != nil {
			if *c.ext == nil {
				*c.ext = map[string]any{}
			}
			(*c.ext)["x-go-name"] = n
			c.goName = n
		}
	}
}

// resolveTypeCollisions finds components that map to one Go type name ("Foo-Bar" and
// "FooBar") and renames all but one, keeping the one whose spec name is the Go name, then
// schemas before other sections, then the first by name. A renamed one gets the first free
// name of Name2, Name3, ...
func resolveTypeCollisions(comps []*component, taken map[string]bool, r renames) {
	groups := map[string][]*component{}
	for _, c := range comps {
		taken[c.goName] = true
		groups[c.goName] = append(groups[c.goName], c)
	}
	for _, goName := range sortedKeys(groups) {
		g := groups[goName]
		if len(g) < 2 {
			continue
		}
		sort.SliceStable(g, func(i, j int) bool { return keepRank(g[i]) < keepRank(g[j]) })
		for _, c := range g[1:] {
			if c.ext == nil {
				continue // a $ref alias: oapi-codegen dedupes identical ones
			}
			n := freeName(goName, taken)
			r[c.section+"/"+c.name] = n
			c.goName = n
		}
	}
}

func keepRank(c *component) int {
	rank := 0
	if c.ext == nil {
		return -1 // cannot be renamed: keep it
	}
	if c.name != c.goName {
		rank += 2
	}
	if c.section != "schemas" {
		rank++
	}
	return rank
}

func freeName(base string, taken map[string]bool) string {
	for i := 2; ; i++ {
		n := base + strconv.Itoa(i)
		if !taken[n] {
			taken[n] = true
			return n
		}
	}
}

// injectHeaders adds the key header parameter to each marked operation whose spec does
// not declare it, optional (the idem runtime answers a missing required key with a
// problem-details 400, which oapi-codegen's own check would not).
func injectHeaders(doc *openapi3.T, ops []*Op) {
	for _, o := range ops {
		if !o.InjectHeader {
			continue
		}
		op := doc.Paths.Value(o.Path).Operations()[o.Method]
		p := openapi3.NewHeaderParameter(o.KeyHeader).WithSchema(openapi3.NewStringSchema()).
			WithDescription("Idempotency key of the request (added by idemgen).")
		op.Parameters = append(op.Parameters, &openapi3.ParameterRef{Value: p})
	}
}

// baseResult is oapi-codegen's output and what idemgen needs to know of its names.
type baseResult struct {
	code string // formatted Go source, oapi-codegen's header removed
	ops  []codegen.OperationDefinition
}

// runCodegen runs oapi-codegen (models, std-http server, strict server). A panic inside it
// becomes an error.
func runCodegen(doc *openapi3.T, pkg string) (res baseResult, err error) {
	codegenMu.Lock()
	defer codegenMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("oapi-codegen failed on this spec (panic: %v)", r)
		}
	}()
	cfg := codegen.Configuration{
		PackageName: pkg,
		Generate:    codegen.GenerateOptions{Models: true, StdHTTPServer: true, Strict: true},
	}
	v := "idemgen"
	cfg.NoVCSVersionOverride = &v
	code, err := codegen.Generate(doc, cfg)
	if err != nil {
		return res, fmt.Errorf("oapi-codegen: %w", err)
	}
	ops, err := codegen.OperationDefinitions(doc)
	if err != nil {
		return res, fmt.Errorf("oapi-codegen: %w", err)
	}
	return baseResult{code: code, ops: ops}, nil
}

// topLevel parses Go source and returns how many times each package-level name is
// declared (methods excluded).
func topLevel(src string) (map[string]int, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "base.go", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]int{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name != "init" && d.Name.Name != "_" {
				names[d.Name.Name]++
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name]++
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name != "_" {
							names[n.Name]++
						}
					}
				}
			}
		}
	}
	return names, nil
}

// stripHeader removes what precedes the package clause (oapi-codegen's own "Code
// generated" comment) and returns the build constraint lines it held.
func stripHeader(src string) (constraints []string, rest string) {
	i := strings.Index(src, "\npackage ")
	if i < 0 {
		return nil, src
	}
	for _, line := range strings.Split(src[:i], "\n") {
		if strings.HasPrefix(line, "//go:build ") {
			constraints = append(constraints, line)
		}
	}
	return constraints, src[i+1:]
}
