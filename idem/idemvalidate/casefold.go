package idemvalidate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
)

// bodyCaseVariant runs caseVariant on r's JSON body, already read into memory by
// oneJSONValue, against the schema route's operation declares for its media type, and
// puts the body back.
func bodyCaseVariant(r *http.Request, route *routers.Route) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Body == nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) ||
		route.Operation == nil || route.Operation.RequestBody == nil || route.Operation.RequestBody.Value == nil {
		return nil
	}
	media := route.Operation.RequestBody.Value.Content.Get(mt)
	if media == nil || media.Schema == nil || media.Schema.Value == nil {
		return nil
	}
	data, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return nil // oneJSONValue read it whole already
	}
	return caseVariant(data, media.Schema.Value)
}

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
// The error names the member by its JSON pointer and the property it shadows; it is nil
// for a body that is not valid JSON (oneJSONValue reports that) or has no schema.
func caseVariant(data []byte, schema *openapi3.Schema) error {
	if schema == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	if p, name, decl := findCaseVariant(v, schema, ""); p != "" {
		return &Error{
			Detail: fmt.Sprintf("request body: %s: member %q differs from the declared property %q only by case", p, name, decl),
		}
	}
	return nil
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
