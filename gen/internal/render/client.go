package render

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/base"
	"github.com/idemgen/idemgen/gen/internal/model"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// clientLayer is what templates/client.go.tmpl renders: the marked operations'
// retrying methods, with oapi-codegen's names.
type clientLayer struct {
	Version string
	Package string
	Spec    string
	Ops     []*clientOp
}

// clientOp is one marked operation on the client side.
type clientOp struct {
	Name   string // oapi-codegen's Go name: CreatePayment
	Method string
	Path   string
	KeyVar string // createPaymentKey: its idemclient.Key
	Key    model.KeySource
	// JSONPointer and FormField are the body key's places: the pointer in a JSON body,
	// the field of a form body (either or both, as the operation's bodies are).
	JSONPointer, FormField string
	Where                  string // the key's place in words, for the doc comment
	Methods                []clientMethod
}

// clientMethod is one method of IdempotentClient: one per request builder oapi-codegen's
// client has for the operation (the typed bodies it supports, and WithBody for any
// content type).
type clientMethod struct {
	Name    string // CreatePayment, CreatePaymentWithBody, CreatePaymentWithFormdataBody
	Builder string // NewCreatePaymentRequest...
	Params  []clientParam
	Body    string // the body's description in the doc comment: "" without a body
}

// clientParam is one parameter of a method after ctx: oapi-codegen's Go variable name
// and type.
type clientParam struct {
	Name, Type string
}

// Client renders ClientFile for the marked operations.
func Client(opts base.Target, m *model.Model, defs []codegen.OperationDefinition) ([]byte, error) {
	l := &clientLayer{Version: opts.Version, Package: opts.Package, Spec: baseName(opts.Spec)}
	byRoute := map[string]*model.Operation{}
	for _, o := range m.Ops {
		byRoute[o.Method+" "+o.Path] = o
	}
	for i := range defs {
		def := &defs[i]
		if def.IsAlias {
			continue
		}
		o := byRoute[strings.ToUpper(def.Method)+" "+def.Path]
		if o == nil {
			continue
		}
		l.Ops = append(l.Ops, buildClientOp(def, o))
	}
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "client.go.tmpl", l); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", base.ClientFile, err)
	}
	// Every import the template may use is listed: base.FormatGo removes the unused ones.
	out, err := base.FormatGo(base.ClientFile, b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting %s: %w\n%s", base.ClientFile, err, b.Bytes())
	}
	return out, nil
}

func buildClientOp(def *codegen.OperationDefinition, o *model.Operation) *clientOp {
	co := &clientOp{Name: def.OperationId, Method: o.Method, Path: o.Path, KeyVar: lowerFirst(def.OperationId) + "Key", Key: o.Key}
	co.Where = "in header " + o.Key.Header
	if o.Key.Body != "" {
		var where []string
		for _, b := range def.Bodies {
			switch {
			case b.IsJSON() && co.JSONPointer == "":
				co.JSONPointer = o.Key.Body
				where = append(where, "in the JSON body at "+o.Key.Body)
			case b.NameTag == "Formdata" && co.FormField == "":
				co.FormField = formField(o.Key.Body)
				where = append(where, "in the form field "+co.FormField)
			}
		}
		co.Where = strings.Join(where, ", or ")
	}
	var lead []clientParam
	for _, p := range def.PathParams {
		lead = append(lead, clientParam{Name: p.GoVariableName(), Type: p.TypeDef()})
	}
	if def.RequiresParamObject() {
		lead = append(lead, clientParam{Name: "params", Type: "*" + def.OperationId + "Params"})
	}
	with := func(extra ...clientParam) []clientParam {
		return append(append([]clientParam(nil), lead...), extra...)
	}
	if !def.HasBody() {
		co.Methods = append(co.Methods, clientMethod{Name: def.OperationId, Builder: "New" + def.OperationId + "Request", Params: lead})
		return co
	}
	for _, b := range def.Bodies {
		if !b.IsSupportedByClient() {
			continue
		}
		co.Methods = append(co.Methods, clientMethod{
			Name: def.OperationId + b.Suffix(), Builder: "New" + def.OperationId + "Request" + b.Suffix(),
			Params: with(clientParam{Name: "body", Type: def.OperationId + b.NameTag + "RequestBody"}),
			Body:   b.ContentType + " body is encoded once",
		})
	}
	co.Methods = append(co.Methods, clientMethod{
		Name: def.OperationId + "WithBody", Builder: "New" + def.OperationId + "RequestWithBody",
		Params: with(clientParam{Name: "contentType", Type: "string"}, clientParam{Name: "body", Type: "io.Reader"}),
		Body:   "body, of any content type, is read once (at most the retry client's MaxBodyBytes)",
	})
	return co
}

// formField is the form field of the body property ptr names: its name, or for a nested
// property name[child], as oapi-codegen's runtime encodes nested form values.
func formField(ptr string) string {
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	f := toks[0]
	for _, t := range toks[1:] {
		f += "[" + t + "]"
	}
	return f
}
