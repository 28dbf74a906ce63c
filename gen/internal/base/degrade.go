package base

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// Degradation is a schema the base types loosely because oapi-codegen cannot type it (a
// multi-type scalar, null in an integer enum, ...), or a part of the document it
// simplifies for the same reason: Keys is its place in the document (mapping keys and
// sequence indexes from the root: components, schemas, Thing, properties, amount), Why
// what oapi-codegen cannot do, Did what idemgen does instead. The request is still
// validated against the spec as written, and the fingerprint reads the whole body: only
// the Go code is looser.
type Degradation struct {
	Keys []string
	Why  string
	Did  string
}

// Message is the warning's text, without its position.
func (d Degradation) Message() string {
	return fmt.Sprintf("%s: %s: idemgen %s", strings.Join(d.Keys, "."), d.Why, d.Did)
}

// looseType is the Go type a schema oapi-codegen cannot type becomes: the JSON as it
// came, or, for a parameter or header (text on the wire), the text.
func looseType(wire bool) (goType, did string) {
	if wire {
		return "string", "types it as string (validation still reads it as the spec says)"
	}
	return "json.RawMessage", "types it as json.RawMessage (validation and the fingerprint still read it whole)"
}

// schemaAt is an inline schema of the document and its place: the mapping keys and
// sequence indexes from the root (as Degradation.Keys). text is set for the schema of a
// parameter or a header, whose value is text on the wire.
type schemaAt struct {
	ref  *openapi3.SchemaRef
	keys []string
	text bool
}

// degrade types loosely the deepest schema of component c that oapi-codegen fails on,
// with x-go-type json.RawMessage, and reports it; ok is false when no schema of c could
// be (the failure is elsewhere).
func degrade(c *component) (Degradation, bool) {
	return degradeFirst(c.schemas())
}

// degradeFirst types loosely the deepest failing schema below the first of list that
// oapi-codegen fails on (see degrade).
func degradeFirst(list []schemaAt) (Degradation, bool) {
	for _, at := range list {
		if at.ref == nil || at.ref.Ref != "" || at.ref.Value == nil {
			continue
		}
		path := []string{"Degraded"}
		_, err := codegen.GenerateGoSchema(at.ref, path)
		if err == nil {
			continue
		}
		failing, keys := deepestFailing(at.ref, path, slices.Clip(at.keys))
		if failing == nil || failing.Value == nil || failing.Value.Extensions["x-go-type"] != nil {
			continue
		}
		if failing.Value.Extensions == nil {
			failing.Value.Extensions = map[string]any{}
		}
		// No x-go-type-import: oapi-codegen's imports always list encoding/json (Format
		// drops the unused ones), and a second import of it would not compile.
		goType, did := looseType(at.text && failing == at.ref)
		failing.Value.Extensions["x-go-type"] = goType
		return Degradation{Keys: keys, Why: "oapi-codegen cannot type this schema (" + rootCause(err) + ")", Did: did}, true
	}
	return Degradation{}, false
}

// schemas are the inline schemas oapi-codegen types component c from, with their places:
// a schema's own, a parameter's schema or content, a request body's or a response's
// content and a response's headers. A component that is a $ref has none (its target is
// typed where it is).
func (c *component) schemas() []schemaAt {
	at := []string{"components", c.section, c.name}
	switch r := c.ref.(type) {
	case *openapi3.SchemaRef:
		if r.Ref == "" {
			return []schemaAt{{r, at, false}}
		}
	case *openapi3.ParameterRef:
		if r.Ref == "" && r.Value != nil {
			return paramSchemas(r.Value, at)
		}
	case *openapi3.ResponseRef:
		if r.Ref == "" && r.Value != nil {
			return responseSchemas(r.Value, at)
		}
	case *openapi3.RequestBodyRef:
		if r.Ref == "" && r.Value != nil {
			return contentSchemas(r.Value.Content, at)
		}
	}
	return nil
}

// operationSchemas are the inline schemas of the operation at path and method (its path
// item's parameters, its own, its request body and its responses), with their places;
// the ones behind a $ref are the components'.
func operationSchemas(path, method string, item *openapi3.PathItem, op *openapi3.Operation) []schemaAt {
	var out []schemaAt
	params := func(ps openapi3.Parameters, at ...string) {
		for i, p := range ps {
			if p != nil && p.Ref == "" && p.Value != nil {
				out = append(out, paramSchemas(p.Value, append(at, "parameters", strconv.Itoa(i)))...)
			}
		}
	}
	params(item.Parameters, "paths", path)
	params(op.Parameters, "paths", path, method)
	if b := op.RequestBody; b != nil && b.Ref == "" && b.Value != nil {
		out = append(out, contentSchemas(b.Value.Content, []string{"paths", path, method, "requestBody"})...)
	}
	if op.Responses != nil {
		for _, code := range spec.SortedKeys(op.Responses.Map()) {
			if r := op.Responses.Value(code); r != nil && r.Ref == "" && r.Value != nil {
				out = append(out, responseSchemas(r.Value, []string{"paths", path, method, "responses", code})...)
			}
		}
	}
	return out
}

func paramSchemas(p *openapi3.Parameter, at []string) []schemaAt {
	out := contentSchemas(p.Content, at)
	if p.Schema != nil {
		out = append(out, schemaAt{p.Schema, append(slices.Clip(at), "schema"), true})
	}
	return out
}

func responseSchemas(r *openapi3.Response, at []string) []schemaAt {
	out := contentSchemas(r.Content, at)
	for _, h := range spec.SortedKeys(r.Headers) {
		if hr := r.Headers[h]; hr != nil && hr.Ref == "" && hr.Value != nil && hr.Value.Schema != nil {
			out = append(out, schemaAt{hr.Value.Schema, append(slices.Clip(at), "headers", h, "schema"), true})
		}
	}
	return out
}

func contentSchemas(c openapi3.Content, at []string) []schemaAt {
	var out []schemaAt
	for _, ct := range spec.SortedKeys(c) {
		if mt := c[ct]; mt != nil && mt.Schema != nil {
			out = append(out, schemaAt{mt.Schema, append(slices.Clip(at), "content", ct, "schema"), false})
		}
	}
	return out
}

// deepestFailing returns, below r (at keys; path is oapi-codegen's naming path), the
// deepest inline schema oapi-codegen fails on whose inline children it does not: the
// property, item or member to type loosely. A $ref is not descended (its component is
// typed, and degraded, on its own).
func deepestFailing(r *openapi3.SchemaRef, path, keys []string) (*openapi3.SchemaRef, []string) {
	if r == nil || r.Value == nil {
		return nil, nil
	}
	if _, err := codegen.GenerateGoSchema(r, path); err == nil {
		return nil, nil
	}
	v := r.Value
	type child struct {
		r    *openapi3.SchemaRef
		name string
		keys []string
	}
	var children []child
	for _, n := range spec.SortedKeys(v.Properties) {
		children = append(children, child{v.Properties[n], n, []string{"properties", n}})
	}
	if v.Items != nil {
		children = append(children, child{v.Items, "Item", []string{"items"}})
	}
	if v.AdditionalProperties.Schema != nil {
		children = append(children, child{v.AdditionalProperties.Schema, "AdditionalProperties", []string{"additionalProperties"}})
	}
	for _, u := range []struct {
		name    string
		members openapi3.SchemaRefs
	}{{"oneOf", v.OneOf}, {"anyOf", v.AnyOf}} {
		for i, m := range u.members {
			children = append(children, child{m, strconv.Itoa(i), []string{u.name, strconv.Itoa(i)}})
		}
	}
	for _, ch := range children {
		if ch.r == nil || ch.r.Ref != "" {
			continue
		}
		if f, k := deepestFailing(ch.r, append(path, ch.name), append(keys, ch.keys...)); f != nil {
			return f, k
		}
	}
	if r.Ref != "" {
		return nil, nil
	}
	return r, keys
}

// rootCause is the last of oapi-codegen's wrapped messages ("error converting Schema
// Thing to Go type: error generating Go schema for property 'amount': unhandled Schema
// type: &[number string]" → "unhandled Schema type: &[number string]").
func rootCause(err error) string {
	msg := err.Error()
	for {
		i := strings.Index(msg, ": ")
		if i < 0 || !strings.HasPrefix(msg, "error ") {
			return msg
		}
		msg = msg[i+2:]
	}
}
