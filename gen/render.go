package gen

import (
	"fmt"
	"strings"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// tmplData is what templates/idempotent.go.tmpl renders.
type tmplData struct {
	Version      string
	Package      string
	Spec         string // base name of the spec file
	Ops          []*tmplOp
	HasMarked    bool
	HasUnmarked  bool
	ExternalBase bool
}

// tmplOp is one operation as the template needs it: oapi-codegen's Go names plus, for a
// marked one, the policy.
type tmplOp struct {
	Name   string // Go name: AddPet (oapi-codegen's)
	Method string
	Path   string
	Marked bool

	// Marked operations only.
	PolicyVar string   // addPetPolicy
	Comment   []string // the policy in words, for reviewers
	Operation string   // Policy.Operation
	KeySource string   // Policy.KeySource
	Required  bool
	Lease     string // Go expressions
	Retention string
	Timeout   string // "" when none
	Isolation string // "" when the database default
	KeyExpr   string // Go expression of type *string: the header field, or key (read from the body)
	BodyKey   string // JSON pointer (body keys)
	BodyField string // request object field holding the decoded body, for BodyKey
	Parts     []tmplPart
}

type tmplPart struct{ Name, Expr string }

func buildTemplateData(opts Options, ops []*Op, defs []codegen.OperationDefinition) (*tmplData, error) {
	d := &tmplData{Version: opts.Version, Package: opts.Package, ExternalBase: opts.Base == BaseExternal}
	d.Spec = baseName(opts.Spec)
	byRoute := map[string]*Op{}
	for _, o := range ops {
		byRoute[o.Method+" "+o.Path] = o
	}
	var errs ErrorList
	seen := map[string]bool{}
	for i := range defs {
		def := &defs[i]
		if def.IsAlias {
			continue
		}
		t := &tmplOp{Name: def.OperationId, Method: strings.ToUpper(def.Method), Path: def.Path}
		d.Ops = append(d.Ops, t)
		o := byRoute[t.Method+" "+t.Path]
		if o == nil {
			d.HasUnmarked = true
			continue
		}
		seen[t.Method+" "+t.Path] = true
		d.HasMarked = true
		t.Marked = true
		t.PolicyVar = lowerFirst(def.OperationId) + "Policy"
		t.Operation = o.Operation
		t.Required = o.Required
		t.Lease = goDuration(o.Lease)
		t.Retention = goDuration(o.Retention)
		if o.Timeout > 0 {
			t.Timeout = goDuration(o.Timeout)
		}
		if o.Isolation != "" {
			t.Isolation = isolationLevels[o.Isolation]
		}
		req := "optional"
		if o.Required {
			req = "required"
		}
		if o.KeyBody != "" {
			t.KeySource = "body " + o.KeyBody
			t.KeyExpr = "key" // declared by the template from BodyKey
		} else {
			t.KeySource = "header " + o.KeyHeader
			var key *codegen.ParameterDefinition
			for j := range def.HeaderParams {
				if strings.EqualFold(def.HeaderParams[j].ParamName, o.KeyHeader) {
					key = &def.HeaderParams[j]
				}
			}
			if key == nil {
				errs.add(o.Pos, "%s: internal error: header %s is not among the parameters oapi-codegen generated", MarkerExt, o.KeyHeader)
				continue
			}
			t.KeyExpr = "request.Params." + key.GoName()
			if !key.HasOptionalPointer() {
				t.KeyExpr = "&" + t.KeyExpr
			}
		}
		src := t.KeySource
		if o.InjectHeader {
			src += " (not in the spec: added by idemgen)"
		}
		timeout, iso := "no timeout", "database default isolation"
		if o.Timeout > 0 {
			timeout = "timeout " + humanDuration(o.Timeout)
		}
		if o.Isolation != "" {
			iso = o.Isolation + " isolation"
		}
		t.Comment = []string{
			fmt.Sprintf("%s is the idempotency policy of %s (%s %s):", t.PolicyVar, o.Operation, t.Method, t.Path),
			fmt.Sprintf("key from %s, %s;", src, req),
			fmt.Sprintf("lease %s, retention %s, %s, %s.", humanDuration(o.Lease), humanDuration(o.Retention), timeout, iso),
		}

		// Fingerprint: path parameters, query parameters, the decoded body; not headers
		// (the key itself, tracing, auth) nor cookies.
		for _, p := range def.PathParams {
			t.Parts = append(t.Parts, tmplPart{Name: "path " + p.ParamName, Expr: "request." + p.GoName()})
		}
		for _, p := range def.QueryParams {
			t.Parts = append(t.Parts, tmplPart{Name: "query " + p.ParamName, Expr: "request.Params." + p.GoName()})
		}
		multi := len(def.Bodies) > 1
		for _, b := range def.Bodies {
			fieldName := "Body"
			if multi {
				fieldName = b.NameTag + "Body"
			}
			if b.NameTag == "" || b.NameTag == "Multipart" {
				errs.add(o.Pos, "%s: the %s request body of %s %s is read as a stream and cannot be fingerprinted; idempotent operations take JSON, form or text bodies", MarkerExt, b.ContentType, t.Method, t.Path)
				continue
			}
			name := "body"
			if multi {
				name = "body " + b.ContentType
			}
			t.Parts = append(t.Parts, tmplPart{Name: name, Expr: "request." + fieldName})
			if o.KeyBody != "" && b.IsJSON() && t.BodyField == "" {
				t.BodyField = "request." + fieldName
			}
		}
		if o.KeyBody != "" {
			t.BodyKey = o.KeyBody
			if t.BodyField == "" {
				errs.add(o.Pos, "%s.body: %s %s has no JSON request body to read the key from", MarkerExt, t.Method, t.Path)
			}
		}
	}
	for _, o := range ops {
		if !seen[o.Method+" "+o.Path] {
			errs.add(o.Pos, "%s: internal error: oapi-codegen generated no handler for %s %s", MarkerExt, o.Method, o.Path)
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return d, nil
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
