package gen

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"go/token"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/template"

	"golang.org/x/tools/imports"

	"github.com/idemgen/idemgen/templates"
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
)

// Options says what to generate.
type Options struct {
	Spec    string // path of the OpenAPI file; messages use it as given
	Package string // Go package name
	Dir     string // output directory; read only with Base external, to check the base is there
	Base    string // BaseOapiCodegen (default) or BaseExternal
	Version string // idemgen version in the header; "" means Version()
	// Warnf, when set, receives warnings: things that generate but are likely mistakes
	// (no operation marked x-idempotent).
	Warnf func(format string, args ...any)
}

// File is one generated file.
type File struct {
	Name string // base name, within the output directory
	Data []byte
}

// Version is the idemgen version for the generated header: the module's release tag when
// built from a tagged module (go tool / go run pkg@vX), else "(devel)". Pseudo-versions are
// not used, so that output does not change with every commit of idemgen itself.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := bi.Main.Version
	if bi.Main.Path != "github.com/idemgen/idemgen" {
		for _, d := range bi.Deps {
			if d.Path == "github.com/idemgen/idemgen" {
				v = d.Version
			}
		}
	}
	if v == "" || v == "(devel)" || strings.Contains(v, "+") || strings.Count(v, "-") >= 2 {
		return "(devel)"
	}
	return v
}

// Generate reads the spec and returns the files to write, sorted by name. Spec problems
// come back as an ErrorList of located errors.
func Generate(opts Options) ([]File, error) {
	if opts.Package == "" {
		return nil, errors.New("no package name")
	}
	if !token.IsIdentifier(opts.Package) {
		return nil, fmt.Errorf("package name %q is not a Go identifier", opts.Package)
	}
	switch opts.Base {
	case "":
		opts.Base = BaseOapiCodegen
	case BaseOapiCodegen, BaseExternal:
	default:
		return nil, fmt.Errorf("unknown base %q (want %s or %s)", opts.Base, BaseOapiCodegen, BaseExternal)
	}
	if opts.Version == "" {
		opts.Version = Version()
	}
	data, err := os.ReadFile(opts.Spec)
	if err != nil {
		return nil, err
	}

	// 1. Markers and $refs, from the source tree, before anything rewrites the document.
	src, err := parseSource(opts.Spec, data)
	if err != nil {
		return nil, err
	}
	if err := src.checkVersion(); err != nil {
		return nil, err
	}
	var errs ErrorList
	src.checkRefs(&errs)
	_, markers := src.readMarkers(&errs)
	if err := errs.err(); err != nil {
		return nil, err
	}
	doc, err := loadDoc(opts.Spec, data)
	if err != nil {
		return nil, src.locateLoadError(err)
	}
	src.checkRefPathItems(doc, &errs)
	ops := src.buildOps(doc, markers, &errs)
	if opts.Base == BaseExternal {
		for _, o := range ops {
			if o.InjectHeader {
				errs.add(o.Pos, "%s: with -base=%s the spec must declare the key header parameter %s (in: header): the package's oapi-codegen output has no field for it otherwise", MarkerExt, BaseExternal, o.KeyHeader)
			}
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	if len(markers) == 0 && opts.Warnf != nil {
		opts.Warnf("%s: no operation is marked %s: the idempotent layer passes every operation through", opts.Spec, MarkerExt)
	}

	// 2. The base: oapi-codegen, with Go name collisions resolved by x-go-name. A collision
	// oapi-codegen would only produce in its output (an enum constant named like a type)
	// is found by parsing that output, and the spec generated again with the type renamed.
	rn := renames{}
	resolveTypeCollisions(components(doc), map[string]bool{}, rn)
	var base baseResult
	for round := 0; ; round++ {
		if round > 0 {
			if doc, err = loadDoc(opts.Spec, data); err != nil {
				return nil, &Error{Pos: Pos{File: opts.Spec}, Msg: err.Error()}
			}
		}
		comps := components(doc)
		rn.apply(comps)
		injectHeaders(doc, ops)
		base, err = runCodegen(doc, opts.Package)
		if err != nil {
			return nil, &Error{Pos: Pos{File: opts.Spec}, Msg: err.Error()}
		}
		names, err := topLevel(base.code)
		if err != nil {
			return nil, &Error{Pos: Pos{File: opts.Spec}, Msg: fmt.Sprintf("oapi-codegen produced Go that does not parse: %v", err)}
		}
		dups := 0
		taken := map[string]bool{}
		for n := range names {
			taken[n] = true
		}
		for _, c := range comps {
			if names[c.goName] > 1 && c.ext != nil {
				rn[c.section+"/"+c.name] = freeName(c.goName, taken)
				dups++
			}
		}
		if dups == 0 {
			var left []string
			for _, n := range sortedKeys(names) {
				if names[n] > 1 {
					left = append(left, n)
				}
			}
			if len(left) > 0 {
				return nil, &Error{Pos: Pos{File: opts.Spec}, Msg: fmt.Sprintf("the generated code would declare %s more than once; rename the schema or operation with x-go-name", strings.Join(left, ", "))}
			}
			break
		}
		if round == 4 {
			return nil, &Error{Pos: Pos{File: opts.Spec}, Msg: "could not resolve Go name collisions in 5 rounds; set x-go-name on the colliding schemas"}
		}
	}

	// 3. The idempotent layer.
	data2, err := buildTemplateData(opts, ops, base.ops)
	if err != nil {
		return nil, err
	}
	if opts.Base == BaseExternal {
		if err := checkExternalBase(opts.Dir, opts.Package, data2); err != nil {
			return nil, err
		}
	}
	layer, err := render(data2)
	if err != nil {
		return nil, err
	}
	files := []File{}
	if opts.Base == BaseOapiCodegen {
		constraints, rest := stripHeader(base.code)
		var b bytes.Buffer
		for _, c := range constraints {
			b.WriteString(c + "\n\n")
		}
		fmt.Fprintf(&b, "// Code generated by idemgen %s, DO NOT EDIT.\n", opts.Version)
		fmt.Fprintf(&b, "// Models, net/http server and strict server generated with oapi-codegen %s.\n\n", OapiCodegenVersion)
		b.WriteString(rest)
		out, err := format.Source(b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("formatting %s: %w", BaseFile, err)
		}
		files = append(files, File{Name: BaseFile, Data: out})
	}
	files = append(files, File{Name: IdempotentFile, Data: layer})
	return files, nil
}

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"quote": func(s string) string { return fmt.Sprintf("%q", s) },
}).ParseFS(templates.FS, "*.tmpl"))

func render(d *tmplData) ([]byte, error) {
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "idempotent.go.tmpl", d); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", IdempotentFile, err)
	}
	// Every import the template may use is listed: imports.Process only removes the unused
	// ones and never searches for packages.
	out, err := imports.Process(IdempotentFile, b.Bytes(), &imports.Options{Comments: true, TabIndent: true, TabWidth: 8})
	if err != nil {
		return nil, fmt.Errorf("formatting %s: %w\n%s", IdempotentFile, err, b.Bytes())
	}
	return out, nil
}

// Leftovers returns the names of files in dir that idemgen wrote earlier (BaseFile or
// IdempotentFile, with idemgen's "Code generated" header above the package clause) and that files no longer
// contains: oapi.gen.go after a switch to -base=external. Write removes them; -check
// reports them.
func Leftovers(dir string, files []File) []string {
	want := map[string]bool{}
	for _, f := range files {
		want[f.Name] = true
	}
	var out []string
	for _, name := range []string{BaseFile, IdempotentFile} {
		if want[name] {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		head, _, _ := bytes.Cut(b, []byte("\npackage ")) // the header is above the package clause
		if bytes.HasPrefix(head, []byte("// Code generated by idemgen ")) || bytes.Contains(head, []byte("\n// Code generated by idemgen ")) {
			out = append(out, name)
		}
	}
	return out
}

// Write writes files into dir (created if missing). Files are written to a temporary name
// and renamed, so a reader never sees half a file. Leftovers are removed.
func Write(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range Leftovers(dir, files) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	for _, f := range files {
		p := filepath.Join(dir, f.Name)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, f.Data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	return nil
}
