package base

import (
	"go/token"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// componentMethodBodies moves into components/schemas, with a $ref in its place, every
// inline schema of an operation's JSON request body whose Go type oapi-codegen gives
// MarshalJSON/UnmarshalJSON methods: a oneOf/anyOf union, an object with
// additionalProperties beside its properties. oapi-codegen (v2.8.2; its issue 2498, for
// unions) declares the request body type of such an inline schema as a defined type,
// `type CreatePaymentJSONRequestBody CreatePaymentJSONBody`, which does not have the
// methods: the body decodes empty (a union) or without its additional properties, and
// encodes so, so the business would not get the body and the fingerprint would not be its
// JSON (another payload under the same key would replay). The body of a $ref is an alias,
// `type CreatePaymentJSONRequestBody = CreatePaymentJSONBody`, with the methods.
//
// The component is named as oapi-codegen names the inline body type (operation id +
// media type tag + "Body": CreatePaymentJSONBody), so the base keeps that Go name; a
// components/schemas key already taken gets a number (CreatePaymentJSONBody2), and
// resolveNames makes the Go names unique as for any component. Which bodies have the
// methods is oapi-codegen's own answer (the type definition it computes for the body). A
// schema shared by several operations (a components/requestBodies entry) is moved once,
// under the first operation's name in path order. A document without an inline JSON body
// that could have them is not touched and costs no oapi-codegen call. oapi-codegen's
// package state must hold this run's configuration (see initCodegen).
func componentMethodBodies(doc *openapi3.T) ([]Degradation, error) {
	if !hasMethodBodyCandidate(doc) {
		return nil, nil
	}
	codegen.SetGlobalStateSpec(doc)
	defs, degraded, err := operationDefinitions(doc)
	if err != nil {
		return degraded, err
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
		methods := map[string]bool{}
		for _, td := range def.TypeDefinitions {
			if len(td.Schema.UnionElements) > 0 || td.Schema.HasAdditionalProperties {
				methods[td.TypeName] = true
			}
		}
		for _, b := range def.Bodies {
			name := def.OperationId + b.NameTag + "Body"
			mt := def.Spec.RequestBody.Value.Content[b.ContentType]
			if !methods[name] || b.Schema.RefType != name || !spec.IsJSON(b.ContentType) || mt == nil || !isMethodBodyCandidate(mt.Schema) {
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
	return degraded, nil
}

// hasMethodBodyCandidate reports an operation whose JSON request body's schema is inline
// and could be a type with JSON methods (see isMethodBodyCandidate).
func hasMethodBodyCandidate(doc *openapi3.T) bool {
	found := false
	spec.ForEachOperation(doc, func(_ *openapi3.PathItem, op *openapi3.Operation) {
		if found || op.RequestBody == nil || op.RequestBody.Value == nil {
			return
		}
		for ct, mt := range op.RequestBody.Value.Content {
			if mt != nil && spec.IsJSON(ct) && isMethodBodyCandidate(mt.Schema) {
				found = true
			}
		}
	})
	return found
}

// isMethodBodyCandidate reports an inline schema (not behind a $ref, no x-go-type) that
// oapi-codegen may give JSON methods: one with oneOf, anyOf or allOf members, or with
// additionalProperties.
func isMethodBodyCandidate(r *openapi3.SchemaRef) bool {
	if r == nil || r.Ref != "" || r.Value == nil || r.Value.Extensions["x-go-type"] != nil {
		return false
	}
	s := r.Value
	ap := s.AdditionalProperties
	return len(s.OneOf)+len(s.AnyOf)+len(s.AllOf) > 0 || ap.Schema != nil || (ap.Has != nil && *ap.Has)
}

// componentResponseBodies moves into components/schemas, with a $ref in its place, the
// inline schema of a components/responses entry's JSON content whose Go type has JSON
// methods (a oneOf/anyOf union, an object with additionalProperties beside its
// properties). oapi-codegen's strict server declares a response component as its own
// type, written after the schema under the name "<Response>JSONResponseBody"
// (NotFoundJSONResponseBody), which it never declares: only the operations' types are
// declared, and a response component's type is declared by the models under the
// component's name. Behind a $ref, both refer to the one component. It runs for a base
// with a strict server only (client-only, oapi-codegen's client names the component's own
// type). oapi-codegen's package state must hold this run's configuration.
func componentResponseBodies(doc *openapi3.T) {
	if doc.Components == nil {
		return
	}
	var taken map[string]bool
	for _, name := range spec.SortedKeys(doc.Components.Responses) {
		r := doc.Components.Responses[name]
		if r == nil || r.Ref != "" || r.Value == nil {
			continue
		}
		for _, ct := range spec.SortedKeys(r.Value.Content) {
			mt := r.Value.Content[ct]
			if mt == nil || !spec.IsJSON(ct) || !isMethodBodyCandidate(mt.Schema) {
				continue
			}
			gs, err := codegen.GenerateGoSchema(mt.Schema, []string{name})
			if err != nil || gs.RefType != "" || len(gs.UnionElements) == 0 && !gs.HasAdditionalProperties {
				continue
			}
			if taken == nil {
				taken = map[string]bool{}
				for n := range doc.Components.Schemas {
					taken[n] = true
				}
				if doc.Components.Schemas == nil {
					doc.Components.Schemas = openapi3.Schemas{}
				}
			}
			key := codegen.SchemaNameToTypeName(name) + "ResponseBody"
			if taken[key] || !token.IsIdentifier(key) {
				key = freeName(validName(key), taken)
			}
			taken[key] = true
			doc.Components.Schemas[key] = &openapi3.SchemaRef{Value: mt.Schema.Value}
			mt.Schema = &openapi3.SchemaRef{Ref: "#/components/schemas/" + key, Value: mt.Schema.Value}
		}
	}
}
