package base

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// This file follows the $refs oapi-codegen does not: to a parameter, body or response
// that is not a component of its kind, and to a schema that is no components/schemas
// entry.

// inlineDeepRefs replaces, in an operation and its path item, a $ref to a parameter,
// request body or response that is not a component of its kind
// ("#/paths/~1things~1%7Bid%7D/get/parameters/1", a bundler's reference into another
// operation) by the value kin-openapi resolved: oapi-codegen follows only
// "#/components/<kind>/<name>" and fails on the others ("unexpected reference depth").
func inlineDeepRefs(item *openapi3.PathItem, op *openapi3.Operation) {
	deep := func(ref, kind string) bool {
		if !strings.HasPrefix(ref, "#/") {
			return false // another file's: internalized first
		}
		parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
		return len(parts) != 3 || parts[0] != "components" || parts[1] != kind
	}
	params := func(ps openapi3.Parameters) {
		for i, p := range ps {
			if p != nil && p.Value != nil && deep(p.Ref, "parameters") {
				ps[i] = &openapi3.ParameterRef{Value: p.Value}
			}
		}
	}
	params(item.Parameters)
	params(op.Parameters)
	if b := op.RequestBody; b != nil && b.Value != nil && deep(b.Ref, "requestBodies") {
		op.RequestBody = &openapi3.RequestBodyRef{Value: b.Value}
	}
	if op.Responses != nil {
		for code, r := range op.Responses.Map() {
			if r != nil && r.Value != nil && deep(r.Ref, "responses") {
				op.Responses.Set(code, &openapi3.ResponseRef{Value: r.Value})
			}
		}
	}
}

// componentDeepSchemaRefs moves the target of every schema $ref that is not a
// components/schemas entry ("#/components/schemas/Order/properties/status", a bundler's
// "#/paths/~1orders/post/requestBody/content/application~1json/schema") into
// components/schemas, under a name made of the pointer's names (OrderStatus), and points
// the $ref at it: oapi-codegen follows only #/components/schemas/<name> ("unexpected
// reference depth: 6"). The target stays where it is too (typed there as before); every
// $ref to it shares the one component, which a $ref inside it may name (a recursive
// schema).
func componentDeepSchemaRefs(doc *openapi3.T) {
	var moved map[string]string // pointer → component
	spec.WalkSchemas(doc, func(_ []string, r *openapi3.SchemaRef, _ bool) {
		if !deepSchemaRef(r.Ref) || r.Value == nil {
			return
		}
		if moved == nil {
			moved = map[string]string{}
		}
		name, ok := moved[r.Ref]
		if !ok {
			name = deepRefName(doc, r.Ref)
			moved[r.Ref] = name
			if doc.Components.Schemas == nil {
				doc.Components.Schemas = openapi3.Schemas{}
			}
			doc.Components.Schemas[name] = &openapi3.SchemaRef{Value: r.Value}
		}
		r.Ref = "#/components/schemas/" + name
	})
}

// structural are the keys of a JSON pointer into a document that name no schema.
var structural = setOf("components", "schemas", "parameters", "requestBodies", "responses", "headers",
	"properties", "items", "additionalProperties", "allOf", "oneOf", "anyOf", "paths", "requestBody",
	"content", "schema")

// deepSchemaRef reports a local $ref that is not "#/components/schemas/<name>".
func deepSchemaRef(ref string) bool {
	if !strings.HasPrefix(ref, "#/") {
		return false
	}
	parts := strings.Split(ref[2:], "/")
	return len(parts) != 3 || parts[0] != "components" || parts[1] != "schemas"
}

// deepRefName is a free components/schemas key for the target of ref, made of its
// pointer's names without the structural ones (components, schemas, properties, items,
// paths, requestBody, content and its media type, ...): OrderStatus, NotesPostTag.
func deepRefName(doc *openapi3.T, ref string) string {
	var words []string
	prev := ""
	for _, tok := range strings.Split(ref[2:], "/") {
		tok, _ = url.PathUnescape(spec.UnescapePointer(tok))
		if !structural[tok] && prev != "content" {
			words = append(words, tok)
		}
		prev = tok
	}
	base := goName(strings.Join(words, " "))
	if doc.Components == nil {
		doc.Components = &openapi3.Components{}
	}
	name := base
	for i := 2; doc.Components.Schemas[name] != nil; i++ {
		name = base + strconv.Itoa(i)
	}
	return name
}
