package base

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/gen/internal/model"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// prepareBase rewrites doc, in memory, into the document the base is generated from, so
// that every valid spec gets a base that compiles (doc.go, "The base", lists each rule).
// The spec file is never changed, and the markers were read before. With an external
// base the key headers stay as the spec declares them: the package's own oapi-codegen
// output has them so. router is the base's server, whose names no schema may take ("" for
// an external base whose server is not known yet); deepRefs says the spec has a $ref to
// no components/<kind>/<name> entry. It returns the operations as
// oapi-codegen defines them (see resolveNames). With client, the names of oapi-codegen's
// client are reserved too.
func prepareBase(doc *openapi3.T, m *model.Model, external bool, router string, client, deepRefs bool) ([]codegen.OperationDefinition, []Degradation, error) {
	doc.Webhooks = nil // OpenAPI 3.1 webhooks are requests the service sends, not serves
	degraded, err := documentRewrites(doc, m, external, router, deepRefs)
	if err != nil {
		return nil, degraded, err
	}
	operationRewrites(doc, m, external)
	if !external {
		more, err := componentMethodBodies(doc)
		degraded = append(degraded, more...)
		if err != nil {
			return nil, degraded, err
		}
		if router != "" { // a strict server
			componentResponseBodies(doc)
		}
	}
	degraded = append(degraded, schemaRewrites(doc)...)
	ops, more, err := resolveNames(doc, router, client)
	return ops, append(degraded, more...), err
}

// documentRewrites are the rewrites of the whole document that come first: the names
// oapi-codegen cannot write (a Failure), the extensions it cannot use, the routes a server
// cannot tell apart, the $refs it does not follow, the text bodies it cannot convert.
func documentRewrites(doc *openapi3.T, m *model.Model, external bool, router string, deepRefs bool) ([]Degradation, error) {
	if fails := unwritableNames(doc); len(fails) > 0 {
		return nil, fails
	}
	degraded := componentExtensions(doc)
	if !external && router != "" { // a server, which routes
		marked := map[string]bool{}
		for _, o := range m.Ops {
			marked[o.Method+" "+o.Path] = true
		}
		routes, fails := equivalentRoutes(doc, marked)
		if len(fails) > 0 {
			return degraded, fails
		}
		degraded = append(degraded, routes...)
	}
	if deepRefs {
		componentDeepSchemaRefs(doc)
	}
	if !external {
		degraded = append(degraded, textBodies(doc)...)
	}
	return degraded, nil
}

// operationRewrites are the rewrites of the operations: the key headers, unique Go names
// for the operations and their parameters, the $refs into other operations inlined,
// callbacks dropped, responses oapi-codegen would type as interfaces.
func operationRewrites(doc *openapi3.T, m *model.Model, external bool) {
	for _, o := range m.Ops {
		if o.Key.Header != "" && !external {
			keyHeader(doc, o)
		}
	}
	uniqueOperationIDs(doc)
	spec.ForEachOperation(doc, func(item *openapi3.PathItem, op *openapi3.Operation) {
		inlineDeepRefs(item, op)
		op.Callbacks = nil // requests the service sends, like webhooks
		params := spec.OperationParams(item, op)
		uniqueParamNames(params)
		pathParamNames(params)
		if op.Responses != nil {
			for code, r := range op.Responses.Map() {
				bodylessResponse(code, r)
			}
		}
	})
	if doc.Components != nil {
		for _, r := range doc.Components.Responses {
			bodylessResponse("", r)
		}
	}
}

// schemaRewrites are the rewrites of each schema (and of the extensions beside each
// $ref), in one walk, and what they simplified.
func schemaRewrites(doc *openapi3.T) []Degradation {
	var degraded []Degradation
	spec.WalkSchemas(doc, func(keys []string, r *openapi3.SchemaRef, first bool) {
		if len(r.Extensions) > 0 { // beside a $ref
			degraded = append(degraded, unusableExtensions(r.Extensions, keys)...)
		}
		if !first {
			return
		}
		s := r.Value
		degraded = append(degraded, propertyExtensions(s, keys)...)
		normalizeAllOf(s)
		undiscriminated := dropUnmappedDiscriminator(s)
		uniqueFieldNames(s)
		for _, d := range []*Degradation{undiscriminated, enumOfStrings(s), enumWithoutNull(s), unwritableSchema(s), enumValues(s), uniqueUnionMembers(s)} {
			if d != nil {
				d := *d
				d.Keys = slices.Clone(keys)
				degraded = append(degraded, d)
			}
		}
	})
	return degraded
}

// keyHeader makes the key header of o an optional string header of the operation in the
// base: added when the spec does not declare it, and replacing the declared one
// otherwise (its format, pattern and required-ness are the protocol's to enforce, with a
// problem+json 400; the handler reads the raw value).
func keyHeader(doc *openapi3.T, o *model.Operation) {
	item := doc.Paths.Value(o.Path)
	op := item.Operations()[o.Method]
	desc := "Idempotency key of the request (added by idemgen)."
	if declared := spec.FindParam(spec.OperationParams(item, op), openapi3.ParameterInHeader, o.Key.Header); declared != nil {
		desc = declared.Description
	}
	op.Parameters = slices.DeleteFunc(op.Parameters, func(p *openapi3.ParameterRef) bool {
		return p.Value != nil && p.Value.In == openapi3.ParameterInHeader && strings.EqualFold(p.Value.Name, o.Key.Header)
	})
	p := openapi3.NewHeaderParameter(o.Key.Header).WithSchema(openapi3.NewStringSchema()).WithDescription(desc)
	op.Parameters = append(op.Parameters, &openapi3.ParameterRef{Value: p})
}

// bodylessResponse fixes response content that oapi-codegen would declare as an interface
// type (a JSON media type with no schema, or an empty one): methods cannot be declared on
// it. A status that has no body (204, 205, 304) loses the content; any other gets the
// schema json.RawMessage, so the handler returns raw JSON.
func bodylessResponse(code string, r *openapi3.ResponseRef) {
	if r == nil || r.Value == nil {
		return
	}
	noBody := code == "204" || code == "205" || code == "304"
	for ct, mt := range r.Value.Content {
		if mt == nil || !spec.IsJSON(ct) || (mt.Schema != nil && !isAnySchema(mt.Schema.Value)) {
			continue
		}
		if noBody {
			delete(r.Value.Content, ct)
			continue
		}
		// encoding/json is among the base's imports already.
		mt.Schema = &openapi3.SchemaRef{Value: &openapi3.Schema{Extensions: map[string]any{"x-go-type": "json.RawMessage"}}}
	}
	if noBody && len(r.Value.Content) == 0 {
		r.Value.Content = nil
	}
}

// isAnySchema reports a schema that constrains nothing (oapi-codegen: interface{}).
func isAnySchema(s *openapi3.Schema) bool {
	return s == nil || (s.Type.IsEmpty() && len(s.Properties) == 0 && s.AdditionalProperties.Schema == nil &&
		s.AdditionalProperties.Has == nil && len(s.AllOf)+len(s.OneOf)+len(s.AnyOf) == 0 && s.Items == nil &&
		len(s.Enum) == 0 && s.Const == nil && s.Extensions["x-go-type"] == nil)
}

// textBodies gives a text/plain request body whose schema is not a string a string schema
// in the base, and reports each: oapi-codegen's strict server converts the body's bytes to
// the body's Go type (MakeNoteTextRequestBody(data)), which does not compile for an
// object, a number, a list, a date-time. The body is text on the wire; requests are still
// validated against the spec as written.
func textBodies(doc *openapi3.T) []Degradation {
	var out []Degradation
	body := func(b *openapi3.RequestBodyRef, at ...string) {
		if b == nil || b.Ref != "" || b.Value == nil {
			return
		}
		mt := b.Value.Content["text/plain"]
		if mt == nil || mt.Schema == nil || mt.Schema.Value == nil || mt.Schema.Value.Extensions["x-go-type"] != nil {
			return
		}
		plain := *mt.Schema.Value
		gs, err := codegen.GenerateGoSchema(&openapi3.SchemaRef{Value: &plain}, []string{"Text"})
		if err == nil && (gs.GoType == "string" || gs.GoType == "[]byte") {
			return
		}
		mt.Schema = &openapi3.SchemaRef{Value: openapi3.NewStringSchema()}
		out = append(out, Degradation{Keys: append(at, "content", "text/plain", "schema"),
			Why: "oapi-codegen's strict server converts a text/plain body's bytes to its Go type, which this schema's is not",
			Did: "types the body as string (validation still reads it as the spec says)"})
	}
	if doc.Components != nil {
		for _, n := range spec.SortedKeys(doc.Components.RequestBodies) {
			body(doc.Components.RequestBodies[n], "components", "requestBodies", n)
		}
	}
	spec.ForEachOperationAt(doc, func(path, method string, _ *openapi3.PathItem, op *openapi3.Operation) {
		body(op.RequestBody, "paths", path, method, "requestBody")
	})
	return out
}

// equivalentRoutes leaves out of the base an operation whose path is an earlier path's (in
// name order) template with other parameter names (/things/{name} beside /things/{id}) and whose method
// the earlier one serves too, with a warning: the OpenAPI specification forbids such paths
// ("as they are identical"), and the server cannot route both (net/http's ServeMux panics
// when the second is registered). A marked operation cannot be left out: it is a Failure.
// The other methods of such a path are served.
func equivalentRoutes(doc *openapi3.T, marked map[string]bool) ([]Degradation, Failures) {
	if doc.Paths == nil {
		return nil, nil
	}
	var degraded []Degradation
	var fails Failures
	first := map[string]string{} // template shape → the first path of it, in name order
	for _, path := range spec.SortedKeys(doc.Paths.Map()) {
		shape := templateParam.ReplaceAllString(path, "{}")
		earlier, dup := first[shape]
		if !dup {
			first[shape] = path
			continue
		}
		item, served := doc.Paths.Value(path), doc.Paths.Value(earlier).Operations()
		for method := range item.Operations() {
			if served[method] == nil {
				continue
			}
			keys := []string{"paths", path, strings.ToLower(method)}
			why := fmt.Sprintf("%s %s is %s %s with other parameter names, which OpenAPI forbids and a server cannot route apart", method, path, method, earlier)
			if marked[method+" "+path] {
				fails = append(fails, Failure{Keys: keys, Msg: why + "; merge the two paths"})
				continue
			}
			item.SetOperation(method, nil)
			degraded = append(degraded, Degradation{Keys: keys, Why: why, Did: "leaves it out of the server (the spec file is unchanged; merge the two paths)"})
		}
		if len(item.Operations()) == 0 {
			doc.Paths.Delete(path)
		}
	}
	return degraded, fails
}

// templateParam is a path template's parameter: {id}.
var templateParam = regexp.MustCompile(`\{[^{}]*\}`)
