package idemvalidate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// caseVariant refuses a JSON body with an object member whose name differs from a
// property its schema declares only by case ("AMOUNT" beside "amount", "Currency" for
// "currency"). openapi3filter validates the member whose name matches exactly, while the
// generated handler's encoding/json fills the field from the last member that matches
// case-insensitively: without this check `{"amount":1999,"AMOUNT":900000000000000}`
// passes validation on "amount" and the handler gets the other value. What is validated
// must be what is decoded.
//
// A member that matches a declared property exactly is never a variant (encoding/json
// prefers the exact match), and neither is one that matches none case-insensitively
// (an additional property). An object schema with explicit additionalProperties is
// skipped at its level: oapi-codegen decodes its declared properties by exact name and
// keeps the rest apart. Names are compared as encoding/json compares them
// (strings.EqualFold: Unicode simple folding, so "ſ" matches "s").
//
// v is the body decoded once (body.go). The error names the member by its JSON pointer
// and the property it shadows; it is nil when there is none or no schema.
func caseVariant(v any, schema *openapi3.Schema) error {
	if schema == nil || !hasCaseVariant(v, schema) {
		return nil
	}
	if p, name, decl := findCaseVariant(v, schema, ""); p != "" {
		return &Error{
			Detail: fmt.Sprintf("request body: %s: member %q differs from the declared property %q only by case", p, name, decl),
		}
	}
	return nil
}

// hasCaseVariant reports whether findCaseVariant would find one, without sorting or
// building pointers: the usual body has none, and this walk allocates nothing.
func hasCaseVariant(v any, schema *openapi3.Schema) bool {
	switch v := v.(type) {
	case map[string]any:
		check := !explicitAdditional(schema)
		for m, e := range v {
			s, exact := property(schema, m, 0)
			if !exact && check && foldsToProperty(schema, m, 0) {
				return true
			}
			if s != nil && hasCaseVariant(e, s) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			for _, s := range itemSchemas(schema) {
				if hasCaseVariant(e, s) {
					return true
				}
			}
		}
	}
	return false
}

// property is the schema of schema's declared property name, looked up as properties
// merges them (schema first, then allOf, anyOf, oneOf members, depth first).
func property(schema *openapi3.Schema, name string, depth int) (*openapi3.Schema, bool) {
	if schema == nil || depth > 16 {
		return nil, false
	}
	if p, ok := schema.Properties[name]; ok && p != nil {
		return p.Value, true
	}
	for _, list := range []openapi3.SchemaRefs{schema.AllOf, schema.AnyOf, schema.OneOf} {
		for _, r := range list {
			if r != nil {
				if s, ok := property(r.Value, name, depth+1); ok {
					return s, true
				}
			}
		}
	}
	return nil, false
}

// foldsToProperty reports whether m matches a declared property of schema (or of its
// composition members) case-insensitively.
func foldsToProperty(schema *openapi3.Schema, m string, depth int) bool {
	if schema == nil || depth > 16 {
		return false
	}
	for n, p := range schema.Properties {
		if p != nil && strings.EqualFold(n, m) {
			return true
		}
	}
	for _, list := range []openapi3.SchemaRefs{schema.AllOf, schema.AnyOf, schema.OneOf} {
		for _, r := range list {
			if r != nil && foldsToProperty(r.Value, m, depth+1) {
				return true
			}
		}
	}
	return false
}

// findCaseVariant walks the value v along schema and returns the pointer, name and
// shadowed property of the first case variant, in document order of the schema's
// properties, members sorted by name (deterministic: JSON objects have no order here).
func findCaseVariant(v any, schema *openapi3.Schema, at string) (ptr, name, decl string) {
	if schema == nil {
		return "", "", ""
	}
	switch v := v.(type) {
	case map[string]any:
		props := properties(schema)
		if !explicitAdditional(schema) {
			for _, m := range sortedKeys(v) {
				if _, exact := props[m]; exact {
					continue
				}
				if d := foldMatch(props, m); d != "" {
					return at + "/" + escapePointer(m), m, d
				}
			}
		}
		for _, m := range sortedKeys(v) {
			if s := props[m]; s != nil {
				if p, n, d := findCaseVariant(v[m], s, at+"/"+escapePointer(m)); p != "" {
					return p, n, d
				}
			}
		}
	case []any:
		items := itemSchemas(schema)
		for i, e := range v {
			for _, s := range items {
				if p, n, d := findCaseVariant(e, s, at+"/"+strconv.Itoa(i)); p != "" {
					return p, n, d
				}
			}
		}
	}
	return "", "", ""
}

// properties are the declared properties of schema and of its allOf, anyOf and oneOf
// members (a union: a member of any of them is decoded into its field).
func properties(schema *openapi3.Schema) map[string]*openapi3.Schema {
	props := map[string]*openapi3.Schema{}
	var add func(s *openapi3.Schema, depth int)
	add = func(s *openapi3.Schema, depth int) {
		if s == nil || depth > 16 { // a cycle through allOf would be a broken spec
			return
		}
		for n, p := range s.Properties {
			if p != nil && props[n] == nil {
				props[n] = p.Value
			}
		}
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, r := range list {
				if r != nil {
					add(r.Value, depth+1)
				}
			}
		}
	}
	add(schema, 0)
	return props
}

// itemSchemas are the item schemas of an array schema and of its composition members.
func itemSchemas(schema *openapi3.Schema) []*openapi3.Schema {
	var out []*openapi3.Schema
	if schema.Items != nil && schema.Items.Value != nil {
		out = append(out, schema.Items.Value)
	}
	for _, list := range []openapi3.SchemaRefs{schema.AllOf, schema.AnyOf, schema.OneOf} {
		for _, r := range list {
			if r != nil && r.Value != nil && r.Value.Items != nil && r.Value.Items.Value != nil {
				out = append(out, r.Value.Items.Value)
			}
		}
	}
	return out
}

// explicitAdditional reports whether schema declares additionalProperties as true or a
// schema: oapi-codegen then generates an UnmarshalJSON that takes the declared
// properties by exact name and the other members into AdditionalProperties, so a case
// variant is an additional property, not the field. (false needs no check here: the
// variant is an unknown member openapi3filter refuses.)
func explicitAdditional(schema *openapi3.Schema) bool {
	ap := schema.AdditionalProperties
	return ap.Schema != nil || (ap.Has != nil && *ap.Has)
}

// foldMatch returns the declared property m matches case-insensitively, the first in
// sorted order when several do; "" when none.
func foldMatch(props map[string]*openapi3.Schema, m string) string {
	best := ""
	for n := range props {
		if strings.EqualFold(n, m) && (best == "" || n < best) {
			best = n
		}
	}
	return best
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pointerEscaper escapes a member name for a JSON pointer (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return pointerEscaper.Replace(s)
}
