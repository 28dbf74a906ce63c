package base

import (
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// This file simplifies one schema at a time where oapi-codegen would refuse it or write Go
// that does not compile: an enum it cannot declare, allOf members it refuses to merge, a
// discriminator it cannot map, a union member listed twice.

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
