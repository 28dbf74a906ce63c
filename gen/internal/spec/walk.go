package spec

import (
	"mime"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// MediaType returns the lower-case type/subtype of a content type, parameters dropped.
func MediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

// IsJSON reports whether ct is a JSON media type: application/json or any type/subtype+json.
func IsJSON(ct string) bool {
	mt := MediaType(ct)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// SortedKeys returns m's keys in sorted order: every walk of a map that shapes output or
// messages goes in this order, so that the same input gives the same bytes.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ForEachOperation calls f for every operation of the document's paths.
func ForEachOperation(doc *openapi3.T, f func(item *openapi3.PathItem, op *openapi3.Operation)) {
	ForEachOperationAt(doc, func(_, _ string, item *openapi3.PathItem, op *openapi3.Operation) { f(item, op) })
}

// ForEachOperationAt is ForEachOperation, giving f the operation's path and method (in
// lower case, as the document's keys are written) too.
func ForEachOperationAt(doc *openapi3.T, f func(path, method string, item *openapi3.PathItem, op *openapi3.Operation)) {
	if doc.Paths == nil {
		return
	}
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		ops := item.Operations()
		for _, method := range SortedKeys(ops) {
			f(path, strings.ToLower(method), item, ops[method])
		}
	}
}

// ForEachSchema calls f once for every schema the document holds (components, parameters,
// bodies, responses and headers of every operation, and every schema they contain).
func ForEachSchema(doc *openapi3.T, f func(*openapi3.Schema)) {
	WalkSchemas(doc, func(_ []string, r *openapi3.SchemaRef, first bool) {
		if first {
			f(r.Value)
		}
	})
}

// WalkSchemas is ForEachSchema, giving f every reference to a schema (a $ref's own
// extensions are its), with the place of the schema: the mapping keys and sequence indexes
// from the document's root to it, as Source.Lookup follows them (components, schemas,
// Order, properties, amount). first is set at the first place the walk reaches the schema
// (the components before the paths; a schema behind a $ref at its definition), where its
// schemas are walked; a schema is first reached before the ones it holds. keys is the
// walk's own stack: f copies it to keep it.
func WalkSchemas(doc *openapi3.T, f func(keys []string, r *openapi3.SchemaRef, first bool)) {
	seen := map[*openapi3.Schema]bool{}
	var keys []string
	var schema func(r *openapi3.SchemaRef, at ...string)
	schema = func(r *openapi3.SchemaRef, at ...string) {
		if r == nil || r.Value == nil {
			return
		}
		n := len(keys)
		keys = append(keys, at...)
		defer func() { keys = keys[:n] }()
		s := r.Value
		if seen[s] || isComponentRef(doc, r.Ref) {
			f(keys, r, false) // a component is walked at its definition
			return
		}
		seen[s] = true
		f(keys, r, true)
		for _, l := range []struct {
			name string
			list openapi3.SchemaRefs
		}{{"allOf", s.AllOf}, {"oneOf", s.OneOf}, {"anyOf", s.AnyOf}, {"prefixItems", s.PrefixItems}} {
			for i, m := range l.list {
				schema(m, l.name, strconv.Itoa(i))
			}
		}
		for _, name := range SortedKeys(s.Properties) {
			schema(s.Properties[name], "properties", name)
		}
		schema(s.Items, "items")
		schema(s.Not, "not")
		schema(s.AdditionalProperties.Schema, "additionalProperties")
	}
	content := func(c openapi3.Content, at ...string) {
		for _, ct := range SortedKeys(c) {
			if c[ct] != nil {
				schema(c[ct].Schema, append(at, "content", ct, "schema")...)
			}
		}
	}
	param := func(p *openapi3.ParameterRef, at ...string) {
		if p != nil && p.Value != nil {
			schema(p.Value.Schema, append(at, "schema")...)
			content(p.Value.Content, at...)
		}
	}
	response := func(r *openapi3.ResponseRef, at ...string) {
		if r == nil || r.Value == nil {
			return
		}
		content(r.Value.Content, at...)
		for _, h := range SortedKeys(r.Value.Headers) {
			if hr := r.Value.Headers[h]; hr != nil && hr.Value != nil {
				schema(hr.Value.Schema, append(at, "headers", h, "schema")...)
			}
		}
	}
	if c := doc.Components; c != nil {
		for _, n := range SortedKeys(c.Schemas) {
			schema(c.Schemas[n], "components", "schemas", n)
		}
		for _, n := range SortedKeys(c.Parameters) {
			param(c.Parameters[n], "components", "parameters", n)
		}
		for _, n := range SortedKeys(c.RequestBodies) {
			if b := c.RequestBodies[n]; b != nil && b.Value != nil {
				content(b.Value.Content, "components", "requestBodies", n)
			}
		}
		for _, n := range SortedKeys(c.Responses) {
			response(c.Responses[n], "components", "responses", n)
		}
	}
	ForEachOperationAt(doc, func(path, method string, item *openapi3.PathItem, op *openapi3.Operation) {
		for i, p := range item.Parameters {
			param(p, "paths", path, "parameters", strconv.Itoa(i))
		}
		for i, p := range op.Parameters {
			param(p, "paths", path, method, "parameters", strconv.Itoa(i))
		}
		if op.RequestBody != nil && op.RequestBody.Value != nil {
			content(op.RequestBody.Value.Content, "paths", path, method, "requestBody")
		}
		if op.Responses != nil {
			for _, code := range SortedKeys(op.Responses.Map()) {
				response(op.Responses.Value(code), "paths", path, method, "responses", code)
			}
		}
	})
}

// ForEachParameter calls f once for every parameter the document declares, with its
// place (as WalkSchemas gives one): the components/parameters entries, then the path
// items' and the operations' own ($refs to the components are theirs).
func ForEachParameter(doc *openapi3.T, f func(at []string, p *openapi3.Parameter)) {
	seen := map[*openapi3.Parameter]bool{}
	visit := func(p *openapi3.ParameterRef, at ...string) {
		if p != nil && p.Value != nil && !seen[p.Value] {
			seen[p.Value] = true
			f(at, p.Value)
		}
	}
	if doc.Components != nil {
		for _, n := range SortedKeys(doc.Components.Parameters) {
			visit(doc.Components.Parameters[n], "components", "parameters", n)
		}
	}
	ForEachOperationAt(doc, func(path, method string, item *openapi3.PathItem, op *openapi3.Operation) {
		for i, p := range item.Parameters {
			visit(p, "paths", path, "parameters", strconv.Itoa(i))
		}
		for i, p := range op.Parameters {
			visit(p, "paths", path, method, "parameters", strconv.Itoa(i))
		}
	})
}

// isComponentRef reports a $ref to an entry of doc's components/schemas.
func isComponentRef(doc *openapi3.T, ref string) bool {
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok || doc.Components == nil {
		return false
	}
	if strings.ContainsAny(name, "~%") { // an escaped name ("Foo~1Bar", "Foo%20Bar")
		unescaped, err := url.PathUnescape(name)
		if err == nil {
			name = unescaped
		}
		name = UnescapePointer(name)
	}
	return doc.Components.Schemas[name] != nil
}

// HTTPMethods are the keys of a path item that hold an operation (lower case).
var HTTPMethods = map[string]bool{
	"get": true, "put": true, "post": true, "delete": true,
	"options": true, "head": true, "patch": true, "trace": true,
}

// OperationParams returns the parameters of op: the path item's, overridden by the
// operation's own of the same name and location.
func OperationParams(item *openapi3.PathItem, op *openapi3.Operation) openapi3.Parameters {
	var out openapi3.Parameters
	for _, p := range item.Parameters {
		if p.Value != nil && op.Parameters.GetByInAndName(p.Value.In, p.Value.Name) != nil {
			continue
		}
		out = append(out, p)
	}
	return append(out, op.Parameters...)
}

// FindParam returns the parameter in location in named name (case-insensitively: HTTP
// header names are), or nil.
func FindParam(params openapi3.Parameters, in, name string) *openapi3.Parameter {
	for _, p := range params {
		if p.Value != nil && p.Value.In == in && strings.EqualFold(p.Value.Name, name) {
			return p.Value
		}
	}
	return nil
}
