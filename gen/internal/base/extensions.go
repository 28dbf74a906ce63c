package base

import (
	"fmt"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// codegenExts are the extensions oapi-codegen reads whose values, when it cannot use them,
// make it refuse the spec ("invalid value for \"x-go-type\": failed to convert type:
// map[string]interface {}"; "x-go-name ... must be a valid Go identifier"), with the test
// of a value it can use: why not, or "". A spec written for another tool has them in
// another shape: go-swagger's x-go-type is an object ({type: Foo, import: {package:
// ...}}). The extensions oapi-codegen ignores when their value is not what it reads
// (x-omitempty, x-enum-varnames, x-order, ...) are left as they are.
var codegenExts = []struct {
	name   string
	usable func(any) string
}{
	{"x-go-type", goTypeValue},
	{"x-go-type-import", goImportValue},
	{"x-go-name", identifierValue},
	{"x-go-type-name", identifierValue},
	{"x-go-type-skip-optional-pointer", boolValue},
	{"x-oapi-codegen-extra-tags", extraTagsValue},
}

// unusableExtensions deletes from ext the extensions of codegenExts whose values
// oapi-codegen cannot use, and reports each (Keys: the extension, below at).
func unusableExtensions(ext map[string]any, at []string) []Degradation {
	var out []Degradation
	for _, e := range codegenExts {
		v, ok := ext[e.name]
		if !ok {
			continue
		}
		why := e.usable(v)
		if why == "" {
			continue
		}
		delete(ext, e.name)
		out = append(out, Degradation{
			Keys: append(append([]string(nil), at...), e.name),
			Why:  fmt.Sprintf("oapi-codegen cannot use this %s: %s", e.name, why),
			Did:  "leaves it out of the base (its Go code is oapi-codegen's default for the schema)",
		})
	}
	return out
}

// propertyExtensions applies unusableExtensions to the extensions of s and of its
// properties (their $refs' and their inline schemas'), before the properties' Go names
// are made unique; keys is the place of s.
func propertyExtensions(s *openapi3.Schema, keys []string) []Degradation {
	var out []Degradation
	if len(s.Extensions) > 0 {
		out = unusableExtensions(s.Extensions, keys)
	}
	for name, p := range s.Properties {
		if p == nil {
			continue
		}
		if len(p.Extensions) > 0 {
			out = append(out, unusableExtensions(p.Extensions, append(slices.Clip(keys), "properties", name))...)
		}
		if p.Ref == "" && p.Value != nil && len(p.Value.Extensions) > 0 {
			out = append(out, unusableExtensions(p.Value.Extensions, append(slices.Clip(keys), "properties", name))...)
		}
	}
	return out
}

// componentExtensions applies unusableExtensions to every parameter the document declares
// (components/parameters, the path items' and the operations'), once each, and to the
// components/responses and requestBodies entries (whose x-go-name names their type).
func componentExtensions(doc *openapi3.T) []Degradation {
	var out []Degradation
	spec.ForEachParameter(doc, func(at []string, p *openapi3.Parameter) {
		out = append(out, unusableExtensions(p.Extensions, at)...)
	})
	if c := doc.Components; c != nil {
		for _, n := range spec.SortedKeys(c.Responses) {
			if r := c.Responses[n]; r != nil && r.Ref == "" && r.Value != nil {
				out = append(out, unusableExtensions(r.Value.Extensions, []string{"components", "responses", n})...)
			}
		}
		for _, n := range spec.SortedKeys(c.RequestBodies) {
			if b := c.RequestBodies[n]; b != nil && b.Ref == "" && b.Value != nil {
				out = append(out, unusableExtensions(b.Value.Extensions, []string{"components", "requestBodies", n})...)
			}
		}
	}
	return out
}

// shape names the JSON shape of v: an object, a list, a number, ...
func shape(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case float64, int, int64:
		return "a number"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}

func identifierValue(v any) string {
	s, ok := v.(string)
	switch {
	case !ok:
		return shape(v) + ", where it reads a Go name (another tool's extension?)"
	case !token.IsIdentifier(s):
		return fmt.Sprintf("%q is not a Go identifier", s)
	}
	return ""
}

func goTypeValue(v any) string {
	s, ok := v.(string)
	switch {
	case !ok:
		return shape(v) + ", where it reads a Go type (another tool's extension, such as go-swagger's?)"
	case strings.ContainsFunc(s, func(r rune) bool { return r == '"' || r == '`' || r == ';' || unicode.IsControl(r) }):
		return fmt.Sprintf("%q is not a Go type expression", s)
	}
	if _, err := parser.ParseExpr(s); err != nil {
		return fmt.Sprintf("%q is not a Go type expression", s)
	}
	return ""
}

func goImportValue(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return shape(v) + ", where it reads {name, path}"
	}
	for k, val := range m {
		s, ok := val.(string)
		switch {
		case !ok:
			return fmt.Sprintf("its %s is %s", k, shape(val))
		case strings.EqualFold(k, "name") && s != "" && s != "." && !token.IsIdentifier(s):
			return fmt.Sprintf("its name %q is not a Go identifier", s)
		case strings.ContainsFunc(s, unicode.IsControl):
			return fmt.Sprintf("its %s %q has a control character", k, s)
		}
	}
	return ""
}

func boolValue(v any) string {
	if _, ok := v.(bool); !ok {
		return shape(v) + ", where it reads true or false"
	}
	return ""
}

// extraTagsValue refuses the struct tags oapi-codegen would refuse: a key that is empty or
// holds a space, a colon, a quote or a control character, a value with a quote or a
// control character. A value it does not read as tags (not an object of strings) it
// ignores, and so is left.
func extraTagsValue(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	for k, val := range m {
		s, ok := val.(string)
		if !ok {
			return ""
		}
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r == '"' || r == '`' || r == ':' || r == ' ' || unicode.IsControl(r) }) {
			return fmt.Sprintf("the tag key %q is not one Go takes", k)
		}
		if strings.ContainsFunc(s, func(r rune) bool { return r == '"' || r == '`' || unicode.IsControl(r) }) {
			return fmt.Sprintf("the value of tag %s has a quote or a control character", k)
		}
	}
	return ""
}
