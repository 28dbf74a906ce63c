package base

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
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
	if fails := unwritableNames(doc); len(fails) > 0 {
		return nil, nil, fails
	}
	degraded := componentExtensions(doc)
	if deepRefs {
		componentDeepSchemaRefs(doc)
	}
	if !external {
		degraded = append(degraded, textBodies(doc)...)
	}
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
	spec.WalkSchemas(doc, func(keys []string, r *openapi3.SchemaRef, first bool) {
		if len(r.Extensions) > 0 { // beside a $ref
			degraded = append(degraded, unusableExtensions(r.Extensions, keys)...)
		}
		if !first {
			return
		}
		s := r.Value
		if len(s.Extensions) > 0 {
			degraded = append(degraded, unusableExtensions(s.Extensions, keys)...)
		}
		for name, p := range s.Properties { // before their names are made unique
			if p == nil {
				continue
			}
			if len(p.Extensions) > 0 {
				degraded = append(degraded, unusableExtensions(p.Extensions, append(slices.Clip(keys), "properties", name))...)
			}
			if p.Ref == "" && p.Value != nil && len(p.Value.Extensions) > 0 {
				degraded = append(degraded, unusableExtensions(p.Value.Extensions, append(slices.Clip(keys), "properties", name))...)
			}
		}
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
	ops, more, err := resolveNames(doc, router, client)
	return ops, append(degraded, more...), err
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

// enumOfStrings drops the format of a string enum whose format oapi-codegen maps to a Go
// type that is not a string (format: date is openapi_types.Date, date-time time.Time,
// uuid openapi_types.UUID, ...): it cannot declare the enum's constants in such a type
// ("2023-09-01" is no Date constant) and refuses the spec. The enum becomes a string type
// with its constants; the JSON is the same string.
func enumOfStrings(s *openapi3.Schema) *Degradation {
	if len(s.Enum) == 0 || s.Format == "" || !s.Type.Is(openapi3.TypeString) || s.Extensions["x-go-type"] != nil {
		return nil
	}
	gs, err := codegen.GenerateGoSchema(&openapi3.SchemaRef{Value: s}, []string{"Enum"})
	if err != nil || gs.GoType == "string" {
		return nil
	}
	s.Format = ""
	return &Degradation{Why: fmt.Sprintf("oapi-codegen cannot declare the enum's values as constants of %s (format: %s)", gs.GoType, gs.OAPISchema.Format),
		Did: "types the enum as a string type with its constants (the JSON is the same)"}
}

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

// enumWithoutNull drops null from the values of an enum that is not of strings (3.1's
// `enum: [1, 2, null]`, with `type: [integer, "null"]` or without): oapi-codegen declares a
// constant per value and refuses null in an integer or number type ("is not a number or
// boolean literal"). The schema is nullable instead: the field is a pointer, nil for null;
// the requests are still validated against the enum as written.
func enumWithoutNull(s *openapi3.Schema) *Degradation {
	if len(s.Enum) == 0 || s.Type.Is(openapi3.TypeString) || !slices.Contains(s.Enum, nil) {
		return nil
	}
	s.Enum = slices.DeleteFunc(s.Enum, func(v any) bool { return v == nil })
	s.Nullable = true
	return &Degradation{Why: "oapi-codegen cannot declare null as a constant of the enum's Go type",
		Did: "leaves null out of its constants and makes the field a pointer, nil for null (validation still reads the enum as written)"}
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

// normalizeAllOf clears, on the members of an allOf, the keywords that do not shape the
// Go type but that oapi-codegen refuses to merge when they differ (readOnly, writeOnly,
// allowEmptyValue, uniqueItems, exclusiveMinimum/Maximum, default). Members are replaced
// by copies, so a component used elsewhere keeps its keywords there.
func normalizeAllOf(s *openapi3.Schema) {
	if len(s.AllOf) == 0 || (len(s.AllOf) == 1 && !hasSiblings(s)) {
		return
	}
	for i, m := range s.AllOf {
		if m == nil || m.Value == nil || !hasMergeFlags(m.Value) {
			continue
		}
		c := *m.Value
		clearMergeFlags(&c)
		s.AllOf[i] = &openapi3.SchemaRef{Ref: m.Ref, Extensions: m.Extensions, Value: &c}
	}
	if hasSiblings(s) {
		clearMergeFlags(s) // oapi-codegen merges the parent as a member too
	}
}

func hasSiblings(s *openapi3.Schema) bool {
	return len(s.Properties) > 0 || len(s.Required) > 0 || s.AdditionalProperties.Schema != nil || s.AdditionalProperties.Has != nil
}

func hasMergeFlags(s *openapi3.Schema) bool {
	return s.ReadOnly || s.WriteOnly || s.AllowEmptyValue || s.UniqueItems || s.Default != nil ||
		s.ExclusiveMin.IsSet() || s.ExclusiveMax.IsSet()
}

func clearMergeFlags(s *openapi3.Schema) {
	s.ReadOnly, s.WriteOnly, s.AllowEmptyValue, s.UniqueItems, s.Default = false, false, false, false, nil
	s.ExclusiveMin, s.ExclusiveMax = openapi3.ExclusiveBound{}, openapi3.ExclusiveBound{}
}

// dropUnmappedDiscriminator removes a discriminator oapi-codegen cannot map to every member
// of its oneOf/anyOf (inline members, members sharing a name): the union is then generated
// without its discriminator accessors. The JSON it reads and writes is the same.
func dropUnmappedDiscriminator(s *openapi3.Schema) *Degradation {
	d := s.Discriminator
	if d == nil {
		return nil
	}
	for _, members := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf} {
		keys := map[string]bool{}
		n := 0
		for _, m := range members {
			if m == nil || m.Value == nil || m.Value.Type.Is(openapi3.TypeNull) {
				continue
			}
			n++
			if m.Ref == "" && len(d.Mapping) > 0 {
				s.Discriminator = nil
				return unmappedDiscriminator
			}
			mapped := false
			for k, v := range d.Mapping {
				if v.Ref == m.Ref {
					keys[k], mapped = true, true
				}
			}
			if !mapped {
				keys[m.Ref[strings.LastIndexByte(m.Ref, '/')+1:]] = true
			}
		}
		if len(keys) < n {
			s.Discriminator = nil
			return unmappedDiscriminator
		}
	}
	return nil
}

// unmappedDiscriminator is dropUnmappedDiscriminator's report.
var unmappedDiscriminator = &Degradation{Why: "oapi-codegen cannot map the discriminator to every member of the union (an inline member, members sharing a name)",
	Did: "generates the union without its discriminator accessors (its JSON is the same)"}

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

// uniqueUnionMembers drops from a oneOf or anyOf a $ref member listed before (the same
// $ref), and reports it: oapi-codegen declares a union's AsA, FromA and MergeA methods per
// member, twice for it ("method Thing.AsA already declared"). The union's JSON is the
// same.
func uniqueUnionMembers(s *openapi3.Schema) *Degradation {
	var dropped []string
	for _, members := range []*openapi3.SchemaRefs{&s.OneOf, &s.AnyOf} {
		if len(*members) < 2 {
			continue
		}
		seen := map[string]bool{}
		*members = slices.DeleteFunc(*members, func(m *openapi3.SchemaRef) bool {
			if m == nil || m.Ref == "" {
				return false
			}
			if seen[m.Ref] {
				dropped = append(dropped, m.Ref)
				return true
			}
			seen[m.Ref] = true
			return false
		})
	}
	if dropped == nil {
		return nil
	}
	return &Degradation{Why: fmt.Sprintf("the union lists %s more than once, and oapi-codegen declares a member's methods once per listing", strings.Join(dropped, ", ")),
		Did: "lists each member once in the base (validation still reads the union as written)"}
}
