package render

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/gen/internal/base"
	"github.com/idemgen/idemgen/gen/internal/marker"
	"github.com/idemgen/idemgen/gen/internal/model"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/idemgen/idemgen/templates"
)

// layer is what templates/idempotent.go.tmpl renders: oapi-codegen's Go names joined with
// the model. It holds names and flags, no Go source.
type layer struct {
	Version  string
	Package  string
	Spec     string // base name of the spec file
	Router   string // the base's router, for the wiring in the doc comment; "" when unknown
	Ops      []*layerOp
	Marked   bool // some operation is marked
	Unmarked bool // some operation is not
	Postgres bool // some marked operation keeps its keys in PostgreSQL (the server takes an *idem.Store)
	Redis    bool // some marked operation keeps its keys in Redis (the server takes an *idemredis.Store)
	Skipped  []model.SkippedOp
}

// layerOp is one operation: its Go name and, when marked, its policy.
type layerOp struct {
	Name   string // oapi-codegen's Go name: AddPet
	Method string
	Path   string
	Policy *policy // nil when unmarked
}

// policy is a marked operation's idem.Policy and the request fields it reads.
type policy struct {
	Var       string   // addPetPolicy
	Comment   []string // the policy in words, for reviewers
	Op        *model.Operation
	Isolation string // pgx constant, "" for the database default
	Redis     bool   // the keys live in Redis (idem/idemredis): no transaction
	Store     string // the server's field of the operation's store: "store" or "redis"
	Key       keyField
	Parts     []part
	Buffers   []buffer // bodies read into memory before the protocol runs
}

// keyField is where the handler reads the raw key.
type keyField struct {
	Field    string // Params field of a header key
	Pointer  bool   // the field is a pointer
	Stringer bool   // the field is not a string (-base=external: format uuid): idem.StringKey
	Body     string // JSON pointer of a body key
	// BodyFields are the request fields of the decoded JSON and form bodies holding it
	// (several when the operation accepts both: the request sends one, the others are nil).
	BodyFields []string
}

// part is one fingerprint input: a request field.
type part struct {
	Name  string // "path id", "query limit", "header X-Dry-Run", "body"
	Field string // request.<Field>, or the buffer variable when Buffered
	Var   bool   // Field is a local variable (a buffered body)
}

// buffer is a body the protocol reads into memory (bounded) to fingerprint it; the
// business method gets a fresh reader over the buffered bytes.
type buffer struct {
	Var   string // local variable
	Field string // request field
	Kind  string // "Multipart" or "Reader" (idem.BufferMultipart, idem.BufferReader)
}

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"quote":    func(s string) string { return fmt.Sprintf("%q", s) },
	"duration": goDuration,
}).ParseFS(templates.FS, "*.tmpl"))

// Layer builds the layer from the model and oapi-codegen's operations, and renders it.
func Layer(opts base.Target, m *model.Model, ops []codegen.OperationDefinition) ([]byte, error) {
	l, err := buildLayer(opts, m, ops)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "idempotent.go.tmpl", l); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", base.IdempotentFile, err)
	}
	// Every import the template may use is listed: base.FormatGo removes the unused ones.
	out, err := base.FormatGo(base.IdempotentFile, b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting %s: %w\n%s", base.IdempotentFile, err, b.Bytes())
	}
	return out, nil
}

func buildLayer(opts base.Target, m *model.Model, defs []codegen.OperationDefinition) (*layer, error) {
	l := &layer{Version: opts.Version, Package: opts.Package, Spec: baseName(opts.Spec), Router: opts.Router, Skipped: m.Unmarked}
	byRoute := map[string]*model.Operation{}
	for _, o := range m.Ops {
		byRoute[o.Method+" "+o.Path] = o
	}
	var errs spec.ErrorList
	seen := map[*model.Operation]bool{}
	for i := range defs {
		def := &defs[i]
		if def.IsAlias {
			continue
		}
		lo := &layerOp{Name: def.OperationId, Method: strings.ToUpper(def.Method), Path: def.Path}
		l.Ops = append(l.Ops, lo)
		o := byRoute[lo.Method+" "+lo.Path]
		if o == nil {
			l.Unmarked = true
			continue
		}
		seen[o] = true
		l.Marked = true
		lo.Policy = buildPolicy(def, o, &errs)
		if lo.Policy.Redis {
			l.Redis = true
		} else {
			l.Postgres = true
		}
	}
	for _, o := range m.Ops {
		if !seen[o] {
			errs.Add(o.Pos, "%s: internal error: oapi-codegen generated no handler for %s %s", marker.MarkerExt, o.Method, o.Path)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return l, nil
}

func buildPolicy(def *codegen.OperationDefinition, o *model.Operation, errs *spec.ErrorList) *policy {
	p := &policy{Var: lowerFirst(def.OperationId) + "Policy", Op: o, Redis: o.Store == marker.StoreRedis, Store: "store"}
	if p.Redis {
		p.Store = "redis"
	}
	if o.Isolation != "" {
		p.Isolation = marker.IsolationLevels[o.Isolation]
	}
	if o.Key.Header != "" {
		param := findParamDef(def.HeaderParams, o.Key.Header)
		if param == nil {
			errs.Add(o.Pos, "%s: internal error: header %s is not among the parameters oapi-codegen generated", marker.MarkerExt, o.Key.Header)
			return p
		}
		p.Key = keyField{Field: param.GoName(), Pointer: param.HasOptionalPointer(), Stringer: param.Schema.TypeDecl() != "string"}
	} else {
		p.Key.Body = o.Key.Body
	}
	for _, pp := range def.PathParams {
		p.Parts = append(p.Parts, part{Name: "path " + pp.ParamName, Field: pp.GoName()})
	}
	for _, q := range def.QueryParams {
		p.Parts = append(p.Parts, part{Name: "query " + q.ParamName, Field: "Params." + q.GoName()})
	}
	for _, h := range o.FingerprintHeaders {
		if param := findParamDef(def.HeaderParams, h); param != nil {
			p.Parts = append(p.Parts, part{Name: "header " + param.ParamName, Field: "Params." + param.GoName()})
		}
	}
	p.bodies(def)
	if p.Key.Body != "" && len(p.Key.BodyFields) == 0 {
		errs.Add(o.Pos, "%s.body: %s %s has no JSON or form request body to read the key from", marker.MarkerExt, o.Method, o.Path)
	}
	p.Comment = policyComment(p.Var, o)
	return p
}

// bodies adds the request bodies to the fingerprint: decoded ones as they are, streamed
// ones (multipart, raw bytes) through a buffer.
//
// Media types that oapi-codegen gives one field (several binary ones: image/png and
// image/jpeg are both Body io.Reader) are one part, named after all of them.
func (p *policy) bodies(def *codegen.OperationDefinition) {
	multi := len(def.Bodies) > 1
	fieldOf := func(b codegen.RequestBodyDefinition) string {
		if multi {
			return b.NameTag + "Body"
		}
		return "Body"
	}
	types := map[string][]string{} // the media types of each field
	for _, b := range def.Bodies {
		types[fieldOf(b)] = append(types[fieldOf(b)], b.ContentType)
	}
	seen := map[string]bool{}
	for _, b := range def.Bodies {
		field := fieldOf(b)
		if seen[field] {
			continue
		}
		seen[field] = true
		name := "body"
		if multi {
			name = "body " + strings.Join(types[field], ", ")
		}
		switch b.NameTag {
		case "Multipart", "":
			kind := "Multipart"
			if b.NameTag == "" {
				kind = "Reader"
			}
			v := lowerFirst(field)
			p.Buffers = append(p.Buffers, buffer{Var: v, Field: field, Kind: kind})
			p.Parts = append(p.Parts, part{Name: name, Field: v, Var: true})
		default:
			p.Parts = append(p.Parts, part{Name: name, Field: field})
			if p.Key.Body != "" && (b.IsJSON() || b.NameTag == "Formdata") {
				p.Key.BodyFields = append(p.Key.BodyFields, field)
			}
		}
	}
}

func findParamDef(params []codegen.ParameterDefinition, name string) *codegen.ParameterDefinition {
	for i := range params {
		if strings.EqualFold(params[i].ParamName, name) {
			return &params[i]
		}
	}
	return nil
}

// policyComment states the policy in words, for reviewers of the generated code.
func policyComment(v string, o *model.Operation) []string {
	src := "header " + o.Key.Header
	switch {
	case o.Key.Body != "":
		src = "body " + o.Key.Body
	case !o.Key.Declared:
		src += " (not in the spec: added by idemgen)"
	}
	req := "optional"
	if o.Required {
		req = "required (a request without one: 400)"
	}
	timeout, iso := "no timeout", "database default isolation"
	if o.Timeout > 0 {
		timeout = "timeout " + marker.HumanDuration(o.Timeout)
	}
	if o.Isolation != "" {
		iso = o.Isolation + " isolation"
	}
	if o.Store == marker.StoreRedis {
		iso = "no transaction (store: redis)"
	}
	if o.Wait > 0 {
		iso += ", duplicates wait up to " + marker.HumanDuration(o.Wait) + " for the owner's answer"
	}
	how := ""
	if o.ByMethod {
		how = ", marked by " + marker.DefaultsExt + ".methods"
	}
	lines := []string{
		fmt.Sprintf("%s is the idempotency policy of %s (%s %s%s):", v, o.Name, o.Method, o.Path, how),
		fmt.Sprintf("key from %s%s, %s;", src, keyConstraints(o.Key.Schema), req),
	}
	if !o.Required {
		lines = append(lines, "a request without a key runs unprotected, as if the operation were not marked;")
	}
	lines = append(lines, fmt.Sprintf("lease %s, retention %s, %s, %s.", marker.HumanDuration(o.Lease), marker.HumanDuration(o.Retention), timeout, iso))
	if o.Key.Body == "" && o.Key.Declared && o.Required {
		lines = append(lines, "The request type has the key header as a pointer (*string) although the spec declares",
			"it required: idem checks that it is there (400) and its constraints, before the handler.")
	}
	if o.Store == marker.StoreRedis {
		lines = append(lines, redisWarning...)
	}
	if len(o.FingerprintHeaders) > 0 {
		lines = append(lines, fmt.Sprintf("Headers in the fingerprint: %s.", strings.Join(o.FingerprintHeaders, ", ")))
	}
	if len(o.OtherHeaders) > 0 {
		lines = append(lines, fmt.Sprintf("Declared headers outside the fingerprint (a retry may change them): %s.", strings.Join(o.OtherHeaders, ", ")))
	}
	if len(o.Cookies) > 0 {
		lines = append(lines, fmt.Sprintf("Declared cookies outside the fingerprint (a retry may change them): %s.", strings.Join(o.Cookies, ", ")))
	}
	for _, n := range o.Notes {
		lines = append(lines, "Note: "+n+".")
	}
	if len(o.OwnErrors) > 0 {
		lines = append(lines, fmt.Sprintf("The spec declares its own %s response(s): render the protocol's rejections in its shape with idem.WithRejectionRenderer (and store.RequestErrorHandler).", strings.Join(o.OwnErrors, ", ")))
	}
	return lines
}

// redisWarning is the policy comment's statement of the Redis store's weaker guarantee.
var redisWarning = []string{
	"STORE: REDIS. A WEAKER GUARANTEE THAN THE POSTGRESQL STORE: the key is NOT in the business's",
	"transaction. The business runs, and must commit its own writes, before the key completes;",
	"when that completion is lost (Redis down or restarted empty, a failover, an eviction, the",
	"lease running out during the business), a retry with the same key RUNS THE BUSINESS AGAIN.",
	"Only for operations whose duplicate is harmless (a like, a star, a toggle); never for money.",
}

func keyConstraints(k model.KeySchema) string {
	c := model.KeyRules(k)
	if len(c) == 0 {
		return ""
	}
	return " (" + strings.Join(c, ", ") + ")"
}

// goDuration prints d as a Go expression: 30 * time.Second, 24 * time.Hour.
func goDuration(d time.Duration) string {
	units := []struct {
		d    time.Duration
		name string
	}{
		{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"},
		{time.Millisecond, "time.Millisecond"}, {time.Microsecond, "time.Microsecond"},
	}
	for _, u := range units {
		if d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return fmt.Sprintf("%d * %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d", int64(d))
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	// Leading initialisms: "HTTPGet" -> "httpGet".
	n := 0
	for n < len(s) && 'A' <= s[n] && s[n] <= 'Z' {
		n++
	}
	switch {
	case n == 0:
		return s
	case n == 1 || n == len(s):
		return strings.ToLower(s[:n]) + s[n:]
	}
	return strings.ToLower(s[:n-1]) + s[n-1:]
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}
