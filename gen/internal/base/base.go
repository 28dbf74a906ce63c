package base

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/gen/internal/model"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"golang.org/x/tools/go/ast/astutil"
)

// Base modes.
const (
	BaseOapiCodegen = "oapi-codegen" // write oapi-codegen's models, server and strict server too
	BaseExternal    = "external"     // the package already has them: write the idempotent layer only
)

// Output file names, in the output directory.
const (
	BaseFile       = "oapi.gen.go"
	IdempotentFile = "idempotent.gen.go"
	ClientFile     = "client.gen.go" // with gen.Options.Client: IdempotentClient
)

// Target is what the base and the rendering need of a run's options, defaults applied:
// the spec's path as given (for messages and the generated headers), the Go package, the
// router of the base, the client and server sides, and the version for the header.
type Target struct {
	Spec       string // the spec's path as the user gave it
	Package    string // Go package name
	Router     string // a key of routers; "" for a client-only package or an external base whose router is not known yet
	Client     bool   // the client side too (gen.Options.Client)
	ClientOnly bool   // no server (gen.Options.ClientOnly)
	External   bool   // the package has oapi-codegen's output already (BaseExternal)
	Version    string // idemgen's version in the generated headers
}

// OapiCodegenVersion is the oapi-codegen release that generates the base.
const OapiCodegenVersion = "v2.8.2"

// codegenMu serialises oapi-codegen: its pkg/codegen keeps the options, the spec and the
// name normaliser in package-level state that each Generate call overwrites.
var codegenMu sync.Mutex

// Output is oapi-codegen's output for the rewritten document, and its operations (for the
// names the idempotent layer uses).
type Output struct {
	constraints []string // build constraint lines oapi-codegen put above its header
	code        string   // unformatted Go source, oapi-codegen's header removed
	Ops         []codegen.OperationDefinition
	// Degraded are the schemas oapi-codegen cannot type that the base types loosely
	// (json.RawMessage) instead of failing: each a warning for the user.
	Degraded []Degradation
	doc      *openapi3.T // the document rewritten for the base, to locate Format's failures in
}

// baseConfig is the oapi-codegen configuration of the base: models, the router's server
// (net/http's for an external base whose router is not known yet: only its names are
// used), strict server; formatting is left to idemgen, which formats the file once.
//
// With client the base has oapi-codegen's client too; clientOnly leaves the servers out.
func baseConfig(pkg, router string, client, clientOnly bool) codegen.Configuration {
	v := "idemgen"
	g := codegen.GenerateOptions{Models: true, Client: client}
	if !clientOnly {
		g.Strict = true
		r, ok := routers[router]
		if !ok {
			r = routers[RouterStdHTTP]
		}
		r.server(&g)
	}
	return codegen.Configuration{
		PackageName:          pkg,
		Generate:             g,
		OutputOptions:        codegen.OutputOptions{SkipFmt: true},
		NoVCSVersionOverride: &v,
	}
}

// Refs are the kinds of $ref the spec's file has (spec.Source.ExternalRefs, DeepRefs): the
// rewrites they need run only then.
type Refs struct {
	External bool // to another file: its schemas move into the document's components
	Deep     bool // a local one to no components/<kind>/<name> entry
}

// Generate rewrites doc for the base (prepareBase) and runs oapi-codegen on it, once.
// Its error is Failures, each at the place of the document it is about: every
// component and operation oapi-codegen cannot generate, even with the schemas it cannot
// type typed loosely (b.Degraded), at once; a panic inside oapi-codegen is one at the
// document's root.
func Generate(doc *openapi3.T, m *model.Model, opts Target, refs Refs) (b Output, err error) {
	codegenMu.Lock()
	defer codegenMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			err = Failures{{Keys: RootKeys, Msg: fmt.Sprintf("oapi-codegen failed on this spec (panic: %v); please report it", r)}}
		}
	}()
	cfg := baseConfig(opts.Package, opts.Router, opts.Client, opts.ClientOnly)
	if err := initCodegen(cfg, doc); err != nil {
		return b, Failures{{Keys: RootKeys, Msg: err.Error()}}
	}
	if refs.External {
		// oapi-codegen maps a $ref to another file to another Go package (import
		// mapping); idemgen writes one package, so the other files' schemas move into
		// this document's components first.
		doc.InternalizeRefs(context.Background(), nil)
	}
	external := opts.External
	b.doc = doc
	b.Ops, b.Degraded, err = prepareBase(doc, m, external, opts.Router, opts.Client, refs.Deep)
	if err != nil {
		return b, err
	}
	if !external { // the package has the base already: only its names are needed
		code, err := codegen.Generate(doc, cfg)
		if err != nil {
			return b, locateGenerateError(doc, err)
		}
		ranCodegen(cfg)
		b.constraints, b.code = stripHeader(code)
	}
	return b, nil
}

// Format checks that the base declares every name once, drops the imports
// oapi-codegen lists but does not use, and formats it with idemgen's header above it:
// one parse, one print. It takes b.code, the largest text of the run, and leaves b
// without it: the parser reads the string in place (readOnly) and nothing holds it once
// its tree is built, so that the source, its tree and the output are never all alive.
func Format(b *Output, opts Target) ([]byte, error) {
	code, size := b.code, len(b.code)
	b.code = ""
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, BaseFile, readOnly(code), parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, Failures{{Keys: RootKeys, Msg: fmt.Sprintf("oapi-codegen produced Go that does not parse: %v (please report it)", err)}}
	}
	dups := redeclared(f)
	if len(dups) > 0 {
		dropIdenticalTypes(fset, f)
		dups = redeclared(f)
	}
	if len(dups) > 0 {
		var fails Failures
		for _, d := range dups {
			keys := goNamePlace(b.doc, d)
			if keys == nil {
				keys = RootKeys
			}
			fails = append(fails, Failure{Keys: keys, Msg: fmt.Sprintf("the generated code would declare %s more than once; rename the schema or operation with x-go-name (and report it: idemgen should have)", d)})
		}
		return nil, fails
	}
	dropDuplicateFields(fset, f)
	dropUnusedImports(fset, f)
	// The header is written as gofmt prints it (comment lines, one blank line), then
	// the file from its package clause: the output of formatting the two together.
	var buf bytes.Buffer
	buf.Grow(size + 512) // the formatted base is smaller than oapi-codegen's text: 0.76-0.94 of it on the corpus
	for _, c := range b.constraints {
		buf.WriteString(c + "\n\n")
	}
	what := "Models, " + routers[opts.Router].label + ", strict server"
	switch {
	case opts.ClientOnly:
		what = "Models and client"
	case opts.Client:
		what += " and client"
	default:
		what = "Models, " + routers[opts.Router].label + " and strict server"
	}
	fmt.Fprintf(&buf, "// Code generated by idemgen %s, DO NOT EDIT.\n", opts.Version)
	fmt.Fprintf(&buf, "// %s generated with oapi-codegen %s.\n\n", what, OapiCodegenVersion)
	if err := gofmt(&buf, fset, f); err != nil {
		return nil, fmt.Errorf("formatting %s: %w", BaseFile, err)
	}
	return buf.Bytes(), nil
}

// readOnly returns the bytes of s without copying them, for a reader that never writes
// to its input (go/parser: its scanner copies every token it keeps). Converting a
// string of megabytes to []byte would hold it twice while it is parsed.
func readOnly(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// FormatGo parses src (a file named name), drops the imports it does not use and prints it
// as gofmt does. The idempotent layer's template lists every import it may use; unlike
// x/tools' imports.Process, this never looks for packages (imports.Process runs `go env`
// and reads the other Go files of the working directory when a selector's package is not
// imported: here, a selector on a name the base declares).
func FormatGo(name string, src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	dropUnusedImports(fset, f)
	var buf bytes.Buffer
	if err := gofmt(&buf, fset, f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gofmtConfig is go/format's printer configuration: gofmt's tabs and spaces, and number
// literals made canonical (0X1F → 0x1F, 1E5 → 1e5), the mode bit go/printer reserves for
// go/format and cmd/gofmt (printerNormalizeNumbers in go/format/format.go).
var gofmtConfig = printer.Config{Mode: printer.UseSpaces | printer.TabIndent | 1<<30, Tabwidth: 8}

// gofmt prints f as go/format.Source would print its source: imports sorted, then one
// print. (format.Node, given a file with an import block, prints it, parses the output
// again and prints that: a second pass over the largest file idemgen writes.)
func gofmt(w io.Writer, fset *token.FileSet, f *ast.File) error {
	ast.SortImports(fset, f)
	return gofmtConfig.Fprint(w, fset, f)
}

// dropIdenticalTypes removes every declaration of a type after the first whose
// declaration prints the same (one inline schema that oapi-codegen declares both among the
// models and among an operation's types, under the one name x-go-type-name gives it), with
// its comments.
func dropIdenticalTypes(fset *token.FileSet, f *ast.File) {
	first := map[string]string{}
	dropped := map[*ast.CommentGroup]bool{}
	decls := f.Decls[:0]
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			decls = append(decls, d)
			continue
		}
		specs := g.Specs[:0]
		for _, sp := range g.Specs {
			ts := sp.(*ast.TypeSpec)
			var b bytes.Buffer
			if err := printer.Fprint(&b, fset, ts); err != nil {
				specs = append(specs, sp)
				continue
			}
			if prev, seen := first[ts.Name.Name]; !seen {
				first[ts.Name.Name] = b.String()
			} else if prev == b.String() {
				for _, c := range f.Comments {
					if c.Pos() >= ts.Pos() && c.End() <= ts.End() || c == ts.Doc || c == ts.Comment {
						dropped[c] = true
					}
				}
				continue
			}
			specs = append(specs, sp)
		}
		g.Specs = specs
		if len(specs) == 0 {
			if g.Doc != nil {
				dropped[g.Doc] = true
			}
			continue
		}
		decls = append(decls, d)
	}
	f.Decls = decls
	f.Comments = slices.DeleteFunc(f.Comments, func(c *ast.CommentGroup) bool { return dropped[c] })
}

// dropDuplicateFields drops, from every struct type of f, a field named and typed like an
// earlier one of the same struct: oapi-codegen's strict server declares a request body's
// field once per media type, and a body offered in several binary media types (image/png,
// image/jpeg, application/pdf: each NameTag "") gets "Body io.Reader" once for each, which
// does not compile; its handler assigns the one field for every media type. A field
// repeated with another type is left (it is reported when the base does not compile).
func dropDuplicateFields(fset *token.FileSet, f *ast.File) {
	ast.Inspect(f, func(n ast.Node) bool {
		st, ok := n.(*ast.StructType)
		if !ok || st.Fields == nil {
			return true
		}
		seen := map[string]string{}
		fields := st.Fields.List[:0]
		for _, fl := range st.Fields.List {
			var b bytes.Buffer
			if len(fl.Names) != 1 || printer.Fprint(&b, fset, fl.Type) != nil {
				fields = append(fields, fl)
				continue
			}
			name := fl.Names[0].Name
			if typ, dup := seen[name]; dup && typ == b.String() && fl.Tag == nil {
				continue
			}
			seen[name] = b.String()
			fields = append(fields, fl)
		}
		st.Fields.List = fields
		return true
	})
}

// redeclared returns the package-level names (methods excluded) f declares more than once.
func redeclared(f *ast.File) []string {
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
	var dups []string
	for _, n := range spec.SortedKeys(names) {
		if names[n] > 1 {
			dups = append(dups, n)
		}
	}
	return dups
}

// dropUnusedImports deletes the imports no selector of f refers to. oapi-codegen lists
// every import its templates may need; a name it cannot be sure of (a path whose last
// element is not an identifier) is kept.
func dropUnusedImports(fset *token.FileSet, f *ast.File) {
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	for _, imp := range slices.Clone(f.Imports) {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := importName(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "_" || name == "." || !token.IsIdentifier(name) || used[name] {
			continue
		}
		if imp.Name != nil {
			astutil.DeleteNamedImport(fset, f, imp.Name.Name, path)
		} else {
			astutil.DeleteImport(fset, f, path)
		}
	}
}

// importName is the package name an import path conventionally has: its last element,
// or the one before a major version suffix (".../chi/v5").
func importName(path string) string {
	parts := strings.Split(path, "/")
	name := parts[len(parts)-1]
	if len(parts) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = parts[len(parts)-2]
	}
	return name
}

// stripHeader removes what precedes the package clause (oapi-codegen's own "Code
// generated" comment), keeping build constraint lines.
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

// SpecFile is the generated file that carries the spec (OpenAPI()).
const SpecFile = "spec.gen.go"
