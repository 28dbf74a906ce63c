package gen

import (
	"errors"
	"fmt"
	"go/token"
	"runtime/debug"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/base"
	"github.com/idemgen/idemgen/gen/internal/genfs"
	"github.com/idemgen/idemgen/gen/internal/model"
	"github.com/idemgen/idemgen/gen/internal/render"
	"github.com/idemgen/idemgen/gen/internal/spec"
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
	ClientFile     = "client.gen.go" // with Options.Client: IdempotentClient
)

// SpecFile is the generated file that carries the spec (OpenAPI()).
const SpecFile = "spec.gen.go"

// OapiCodegenVersion is the oapi-codegen release that generates the base.
const OapiCodegenVersion = "v2.8.2"

// Extension names read from the spec.
const (
	// MarkerExt marks an operation idempotent.
	MarkerExt = "x-idempotent"
	// DefaultsExt, at the document root, holds defaults for every marker's fields.
	DefaultsExt = "x-idempotent-defaults"
)

// Routers: the HTTP server oapi-codegen writes into the base, around its strict server.
// The idempotent layer is the same for each: it implements StrictServerInterface, whose
// responses write to an http.ResponseWriter whatever the router.
const (
	RouterStdHTTP = "std-http" // net/http's ServeMux (the default)
	RouterChi     = "chi"      // github.com/go-chi/chi/v5
	RouterEcho    = "echo"     // github.com/labstack/echo/v4
	RouterGin     = "gin"      // github.com/gin-gonic/gin
)

// Routers lists the routers idemgen writes a base for, the default first.
var Routers = []string{RouterStdHTTP, RouterChi, RouterEcho, RouterGin}

// Options says what to generate.
type Options struct {
	Spec    string // path of the OpenAPI file; messages use it as given
	Package string // Go package name
	Dir     string // output directory; read only with Base external, to check the base is there
	Base    string // BaseOapiCodegen (default) or BaseExternal
	// Overlays are OpenAPI Overlay documents (1.0 or 1.1) applied to the spec, in order,
	// before anything reads it, with the library oapi-codegen applies its overlays with
	// (github.com/speakeasy-api/openapi/overlay): markers can be added to a spec one does
	// not own. Every generated file, spec.gen.go included, is the overlaid document's; a
	// mistake in what an overlay wrote is reported at its place in the overlay file.
	Overlays []string
	// Router is the server of the base idemgen writes: RouterStdHTTP (default),
	// RouterChi, RouterEcho or RouterGin. With BaseExternal the package's own
	// oapi-codegen output says which (Router, when set, must agree with it); it shapes
	// only the wiring shown in the generated doc comment.
	Router string
	// Client also generates the client side: oapi-codegen's client (in BaseFile, beside
	// the models the server uses) and ClientFile, whose IdempotentClient calls every
	// marked operation through idemclient's retry loop (one key per logical call, the
	// same key and body on every attempt). With BaseExternal the package's own
	// oapi-codegen output must have the client (client: true) and only ClientFile is
	// added to the idempotent layer.
	Client bool
	// ClientOnly (implies Client) generates no server: BaseFile holds the models and the
	// client, IdempotentFile is not written; for a package that calls the service.
	ClientOnly bool
	Version    string // idemgen version in the header; "" means Version()
	// Warnf, when set, receives warnings, each a located line: things that generate but
	// are likely mistakes (no operation marked x-idempotent), and every guess idemgen
	// makes about a key the spec does not declare plainly (the name of an added header,
	// a header declared twice, a body property that may be the key; see "The key a spec
	// declares" in the package doc).
	Warnf func(format string, args ...any)
}

// File is one generated file.
type File = genfs.File

// Version is the idemgen version for the generated header: the module's release tag when
// built from a tagged module (go tool / go run pkg@vX), else "(devel)". Pseudo-versions and
// replaced modules (a local checkout) are not used, so that output does not change with
// every commit of idemgen itself.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := bi.Main.Version
	if bi.Main.Replace != nil { // go tool idemgen from a local checkout (replace ... => ../idemgen)
		v = "(devel)"
	}
	if bi.Main.Path != "github.com/idemgen/idemgen" {
		for _, d := range bi.Deps {
			if d.Path == "github.com/idemgen/idemgen" {
				v = d.Version
				if d.Replace != nil { // a local checkout (replace ... => ../idemgen): v0.0.0 says nothing
					v = "(devel)"
				}
			}
		}
	}
	if v == "" || v == "(devel)" || strings.Contains(v, "+") || strings.Count(v, "-") >= 2 {
		return "(devel)"
	}
	return v
}

// Generate reads the spec and returns the files to write, sorted by name. It is one
// pipeline, a step per package (gen/internal/...):
//
//	spec    the file as a node tree (positions) and as kin-openapi's document, and the
//	        document's own checks
//	marker  the markers as written, each field located
//	model   each marker against the operation it marks, into the typed model; every
//	        error of the run is reported at once, as an ErrorList of located errors
//	base    the document rewritten for the base (unique, valid Go names, the key
//	        headers, what oapi-codegen cannot generate), then oapi-codegen, once
//	render  the idempotent layer and the client from the model and oapi-codegen's
//	        names, and the spec file: the spec embedded, OpenAPI() parses it once
//
// Writing is [Emit]'s, through a [FileSystem].
func Generate(opts Options) ([]File, error) {
	files, err := generate(opts)
	if err != nil {
		return nil, located(err)
	}
	return files, nil
}

// generate is Generate, its located errors as the steps return them (spec.ErrorList).
func generate(opts Options) ([]File, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s, err := spec.Load(opts.Spec, opts.Overlays...)
	if err != nil {
		return nil, err
	}
	m, err := check(s, opts)
	if err != nil {
		return nil, err
	}
	// The warnings about operations first (the ones left unmarked, the unmarked ones that
	// declare a key): they explain the summary that follows them.
	for _, w := range m.Warnings {
		if opts.Warnf != nil {
			opts.Warnf("%s", w.Error())
		}
	}
	for _, u := range m.Unmarked {
		if opts.Warnf != nil {
			opts.Warnf("%s", unmarkedWarning(u))
		}
	}
	if len(m.Ops) == 0 && opts.Warnf != nil {
		opts.Warnf("%s: no operation is marked %s: the idempotent layer passes every operation through", opts.Spec, MarkerExt)
	}
	t := opts.target()
	specCode, err := render.Spec(t, s) // before the base step rewrites s.doc
	if err != nil {
		return nil, atRoot(s.Src, err)
	}
	b, err := base.Generate(s.Doc, m, t, base.Refs{External: s.Src.ExternalRefs(), Deep: s.Src.DeepRefs()})
	warnDegraded(s.Src, b.Degraded, opts)
	if err != nil {
		return nil, locateFailures(s.Src, err)
	}
	if opts.Base == BaseExternal {
		if opts.Router, err = base.CheckExternal(opts.Dir, opts.Package, opts.Router, b.Ops, m.Ops, opts.Client, opts.ClientOnly); err != nil {
			return nil, err
		}
		t.Router = opts.Router
	}
	// The idempotent layer and the client first: they are all that needs oapi-codegen's
	// operations, which can go before the base, the largest file, is parsed and printed.
	var client, layer []byte
	var renderErr error
	if opts.Client {
		client, renderErr = render.Client(t, m, b.Ops)
	}
	if !opts.ClientOnly && renderErr == nil { // a client-only package has no server: no layer, no spec to validate with
		layer, renderErr = render.Layer(t, m, b.Ops)
	}
	b.Ops = nil
	var files []File
	if opts.Base == BaseOapiCodegen {
		code, err := base.Format(&b, t)
		if err != nil {
			return nil, locateFailures(s.Src, err)
		}
		files = append(files, File{Name: BaseFile, Data: code})
	}
	if renderErr != nil {
		return nil, renderErr
	}
	if opts.Client {
		files = append(files, File{Name: ClientFile, Data: client})
	}
	if !opts.ClientOnly {
		files = append(files, File{Name: SpecFile, Data: specCode}, File{Name: IdempotentFile, Data: layer})
	}
	return files, nil
}

func (opts Options) withDefaults() (Options, error) {
	if opts.Package == "" {
		return opts, errors.New("no package name")
	}
	if !token.IsIdentifier(opts.Package) || token.IsKeyword(opts.Package) {
		return opts, fmt.Errorf("package name %q is not a Go identifier", opts.Package)
	}
	switch opts.Base {
	case "":
		opts.Base = BaseOapiCodegen
	case BaseOapiCodegen, BaseExternal:
	default:
		return opts, fmt.Errorf("unknown base %q (want %s or %s)", opts.Base, BaseOapiCodegen, BaseExternal)
	}
	if err := base.CheckRouter(opts.Router); err != nil {
		return opts, err
	}
	if opts.ClientOnly {
		if opts.Router != "" {
			return opts, fmt.Errorf("router %q with a client-only package: there is no server to route", opts.Router)
		}
		opts.Client = true
	}
	if opts.Router == "" && opts.Base == BaseOapiCodegen && !opts.ClientOnly {
		opts.Router = RouterStdHTTP
	}
	if opts.Version == "" {
		opts.Version = Version()
	}
	return opts, nil
}

// target is what the base and the rendering need of opts (after withDefaults).
func (opts Options) target() base.Target {
	return base.Target{Spec: opts.Spec, Package: opts.Package, Router: opts.Router, Client: opts.Client,
		ClientOnly: opts.ClientOnly, External: opts.Base == BaseExternal, Version: opts.Version}
}

// check runs every check of the spec and of its markers (model.Check), and the one the base
// option adds, and builds the model. All errors come back at once, sorted by position.
func check(s *spec.Spec, opts Options) (*model.Model, error) {
	var errs spec.ErrorList
	m := model.Check(s, &errs)
	if m == nil {
		return nil, errs.Err()
	}
	if opts.Base == BaseExternal {
		for _, o := range m.Ops {
			if o.Key.Header != "" && !o.Key.Declared {
				errs.Add(o.Pos, "%s: with -base=%s the spec must declare the key header parameter %s (in: header): the package's oapi-codegen output has no field for it otherwise", MarkerExt, BaseExternal, o.Key.Header)
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// warnDegraded warns, located, of each schema the base types loosely (base.Degradation).
func warnDegraded(src *spec.Source, degraded []base.Degradation, opts Options) {
	if opts.Warnf == nil {
		return
	}
	var warnings spec.ErrorList // the warnings as located messages, to sort them
	for _, d := range degraded {
		warnings.Add(src.PosOf(d.Keys...), "%s", d.Message())
	}
	if err := warnings.Err(); err != nil {
		for _, w := range err.(spec.ErrorList) {
			opts.Warnf("%s", w.Error())
		}
	}
}

// locateFailures returns the base's Failures as located errors, sorted by position;
// any other error of the base is one at the document's root.
func locateFailures(src *spec.Source, err error) error {
	fails, ok := err.(base.Failures)
	if !ok {
		return atRoot(src, err)
	}
	var errs spec.ErrorList
	for _, f := range fails {
		errs.Add(src.PosOf(f.Keys...), "%s", f.Msg)
	}
	return errs.Err()
}

// atRoot is err located at the document's root: an error about no one place of it.
func atRoot(src *spec.Source, err error) error {
	return &Error{Pos: src.PosOf(base.RootKeys...), Msg: err.Error()}
}
