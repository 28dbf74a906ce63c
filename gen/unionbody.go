package gen

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// componentUnionBodies moves every inline oneOf/anyOf schema of an operation's JSON
// request body into components/schemas, and puts a $ref in its place. oapi-codegen
// (v2.8.2, its issue 2498) declares the request body type of an inline union as a defined
// type, `type CreatePaymentJSONRequestBody CreatePaymentJSONBody`, which does not have the
// union's MarshalJSON/UnmarshalJSON: the body decodes empty and encodes as {}, so the
// business would get nothing and the fingerprint would always be {}. The body of a $ref is
// an alias, `type CreatePaymentJSONRequestBody = CreatePaymentJSONBody`, with the union's
// methods.
//
// The component is named as oapi-codegen names the inline body type
// (operation id + media type tag + "Body": CreatePaymentJSONBody), so the base keeps that
// Go name; a components/schemas key already taken gets a number (CreatePaymentJSONBody2),
// and resolveNames makes the Go names unique as for any component. Which bodies are unions
// is oapi-codegen's own answer (the union elements of the type it defines for the body).
// A schema shared by several operations (a components/requestBodies entry) is moved once,
// under the first operation's name in path order. A document without an inline union body
// is not touched, and costs no oapi-codegen call. oapi-codegen's package state must hold
// this run's configuration (see initCodegen).
func componentUnionBodies(doc *openapi3.T) error {
	if !hasInlineUnionBody(doc) {
		return nil
	}
	codegen.SetGlobalStateSpec(doc)
	defs, err := codegen.OperationDefinitions(doc)
	if err != nil {
		return fmt.Errorf("oapi-codegen: %w", err)
	}
	if doc.Components == nil {
		doc.Components = &openapi3.Components{}
	}
	if doc.Components.Schemas == nil {
		doc.Components.Schemas = openapi3.Schemas{}
	}
	taken := map[string]bool{}
	for n := range doc.Components.Schemas {
		taken[n] = true
	}
	for _, def := range defs {
		if def.IsAlias || def.Spec == nil || def.Spec.RequestBody == nil || def.Spec.RequestBody.Value == nil {
			continue
		}
		unions := map[string]bool{}
		for _, td := range def.TypeDefinitions {
			if len(td.Schema.UnionElements) > 0 {
				unions[td.TypeName] = true
			}
		}
		for _, b := range def.Bodies {
			name := def.OperationId + b.NameTag + "Body"
			mt := def.Spec.RequestBody.Value.Content[b.ContentType]
			if !unions[name] || b.Schema.RefType != name || !isJSON(b.ContentType) || mt == nil || !isInlineUnion(mt.Schema) {
				continue
			}
			key := name
			if taken[key] {
				key = freeName(name, taken)
			}
			taken[key] = true
			doc.Components.Schemas[key] = &openapi3.SchemaRef{Value: mt.Schema.Value}
			mt.Schema = &openapi3.SchemaRef{Ref: "#/components/schemas/" + key, Value: mt.Schema.Value}
		}
	}
	return nil
}

// hasInlineUnionBody reports an operation whose JSON request body's schema is an inline
// oneOf or anyOf (not behind a $ref).
func hasInlineUnionBody(doc *openapi3.T) bool {
	found := false
	forEachOperation(doc, func(_ *openapi3.PathItem, op *openapi3.Operation) {
		if found || op.RequestBody == nil || op.RequestBody.Value == nil {
			return
		}
		for ct, mt := range op.RequestBody.Value.Content {
			if mt != nil && isJSON(ct) && isInlineUnion(mt.Schema) {
				found = true
			}
		}
	})
	return found
}

// isInlineUnion reports an inline schema with oneOf or anyOf members whose Go type
// oapi-codegen chooses (no x-go-type).
func isInlineUnion(r *openapi3.SchemaRef) bool {
	return r != nil && r.Ref == "" && r.Value != nil && len(r.Value.OneOf)+len(r.Value.AnyOf) > 0 &&
		r.Value.Extensions["x-go-type"] == nil
}
