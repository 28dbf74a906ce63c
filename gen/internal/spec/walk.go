package spec

import (
	"mime"
	"sort"
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
	if doc.Paths == nil {
		return
	}
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for _, method := range SortedKeys(item.Operations()) {
			f(item, item.Operations()[method])
		}
	}
}

// ForEachSchema calls f once for every schema the document holds (components, parameters,
// bodies, responses and headers of every operation, and every schema they contain).
func ForEachSchema(doc *openapi3.T, f func(*openapi3.Schema)) {
	seen := map[*openapi3.Schema]bool{}
	var schema func(r *openapi3.SchemaRef)
	schema = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil || seen[r.Value] {
			return
		}
		s := r.Value
		seen[s] = true
		f(s)
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf, s.PrefixItems} {
			for _, m := range list {
				schema(m)
			}
		}
		for _, n := range SortedKeys(s.Properties) {
			schema(s.Properties[n])
		}
		schema(s.Items)
		schema(s.Not)
		schema(s.AdditionalProperties.Schema)
	}
	content := func(c openapi3.Content) {
		for _, ct := range SortedKeys(c) {
			if c[ct] != nil {
				schema(c[ct].Schema)
			}
		}
	}
	param := func(p *openapi3.ParameterRef) {
		if p != nil && p.Value != nil {
			schema(p.Value.Schema)
			content(p.Value.Content)
		}
	}
	response := func(r *openapi3.ResponseRef) {
		if r == nil || r.Value == nil {
			return
		}
		content(r.Value.Content)
		for _, h := range SortedKeys(r.Value.Headers) {
			if hr := r.Value.Headers[h]; hr != nil && hr.Value != nil {
				schema(hr.Value.Schema)
			}
		}
	}
	if c := doc.Components; c != nil {
		for _, n := range SortedKeys(c.Schemas) {
			schema(c.Schemas[n])
		}
		for _, n := range SortedKeys(c.Parameters) {
			param(c.Parameters[n])
		}
		for _, n := range SortedKeys(c.RequestBodies) {
			if b := c.RequestBodies[n]; b != nil && b.Value != nil {
				content(b.Value.Content)
			}
		}
		for _, n := range SortedKeys(c.Responses) {
			response(c.Responses[n])
		}
	}
	ForEachOperation(doc, func(item *openapi3.PathItem, op *openapi3.Operation) {
		for _, p := range OperationParams(item, op) {
			param(p)
		}
		if op.RequestBody != nil && op.RequestBody.Value != nil {
			content(op.RequestBody.Value.Content)
		}
		if op.Responses != nil {
			for _, code := range SortedKeys(op.Responses.Map()) {
				response(op.Responses.Value(code))
			}
		}
	})
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
