package base

import (
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// component is a named entry of components/* that oapi-codegen turns into a Go type.
type component struct {
	section, name string
	goName        string
	ref           any             // the *SchemaRef, *ParameterRef, ... of the entry
	ext           *map[string]any // where to put x-go-name; nil when it cannot be renamed
	renamed       bool
}

func (c *component) setGoName(n string) {
	if *c.ext == nil {
		*c.ext = map[string]any{}
	}
	(*c.ext)["x-go-name"] = n
	c.goName, c.renamed = n, true
}

// typeDefinitions runs oapi-codegen's type collection on this one component.
func (c *component) typeDefinitions() ([]codegen.TypeDefinition, error) {
	switch r := c.ref.(type) {
	case *openapi3.SchemaRef:
		return codegen.GenerateTypesForSchemas(nil, map[string]*openapi3.SchemaRef{c.name: r}, nil)
	case *openapi3.ParameterRef:
		return codegen.GenerateTypesForParameters(nil, map[string]*openapi3.ParameterRef{c.name: r})
	case *openapi3.ResponseRef:
		return codegen.GenerateTypesForResponses(nil, openapi3.ResponseBodies{c.name: r})
	case *openapi3.RequestBodyRef:
		return codegen.GenerateTypesForRequestBodies(nil, map[string]*openapi3.RequestBodyRef{c.name: r})
	}
	return nil, nil
}

func components(doc *openapi3.T) []*component {
	if doc.Components == nil {
		return nil
	}
	var out []*component
	add := func(section, name, ref string, v any, ext *map[string]any) {
		c := &component{section: section, name: name, ref: v, goName: codegen.SchemaNameToTypeName(name)}
		if ref == "" {
			c.ext = ext
			if n, ok := (*ext)["x-go-name"].(string); ok && n != "" {
				c.goName = n
			}
		}
		out = append(out, c)
	}
	cs := doc.Components
	for _, n := range spec.SortedKeys(cs.Schemas) {
		if r := cs.Schemas[n]; r != nil && r.Value != nil {
			add("schemas", n, r.Ref, r, &r.Value.Extensions)
		}
	}
	for _, n := range spec.SortedKeys(cs.Parameters) {
		if r := cs.Parameters[n]; r != nil && r.Value != nil {
			add("parameters", n, r.Ref, r, &r.Value.Extensions)
		}
	}
	for _, n := range spec.SortedKeys(cs.Responses) {
		if r := cs.Responses[n]; r != nil && r.Value != nil {
			add("responses", n, r.Ref, r, &r.Value.Extensions)
		}
	}
	for _, n := range spec.SortedKeys(cs.RequestBodies) {
		if r := cs.RequestBodies[n]; r != nil && r.Value != nil {
			add("requestBodies", n, r.Ref, r, &r.Value.Extensions)
		}
	}
	return out
}
