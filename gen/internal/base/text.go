package base

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// oapi-codegen copies names of the spec into the Go source it writes, in string literals,
// struct tags and comments, and refuses a spec whose names would break out of them (its
// validateSpec): a double quote, a backtick or a control character in a path, a
// parameter's or a property's name, a format; a backslash too in a discriminator's
// values. This file finds them first: a schema that has such a name is simplified (a
// warning), a path or a parameter that has one, which the server needs as written, is a
// located error.

// unwritable reports whether s holds a character oapi-codegen refuses to copy into Go:
// a double quote, a backtick, a control character, and with backslash a backslash.
func unwritable(s string, backslash bool) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return r == '"' || r == '`' || unicode.IsControl(r) || backslash && r == '\\'
	})
}

// unwritableNames are the paths and parameter names of the document that hold a
// character oapi-codegen refuses to copy into Go (see unwritable), each a Failure at its
// place: the server needs them as written to route and bind the requests.
func unwritableNames(doc *openapi3.T) Failures {
	var out Failures
	if doc.Paths != nil {
		for _, path := range doc.Paths.InMatchingOrder() {
			if unwritable(path, false) {
				out = append(out, Failure{Keys: []string{"paths", path}, Msg: fmt.Sprintf("oapi-codegen cannot write the path %s into Go (it holds a quote, a backtick or a control character), and the server routes by it; change the path", strconv.Quote(path))})
			}
		}
	}
	spec.ForEachParameter(doc, func(at []string, p *openapi3.Parameter) {
		if unwritable(p.Name, false) {
			out = append(out, Failure{Keys: append(at, "name"), Msg: fmt.Sprintf("oapi-codegen cannot write the parameter name %s into Go (it holds a quote, a backtick or a control character), and the server needs it as written; rename the parameter", strconv.Quote(p.Name))})
		}
	})
	return out
}

// unwritableSchema simplifies a schema that holds a name oapi-codegen refuses to copy
// into Go, and reports it (nil when it holds none): a property name (the object is typed
// as json.RawMessage: it has no Go field for that property), a format (dropped), a
// discriminator's property name or mapping key (the discriminator is dropped, as for one
// oapi-codegen cannot map).
func unwritableSchema(s *openapi3.Schema) *Degradation {
	if s.Extensions["x-go-type"] != nil {
		return nil
	}
	for _, name := range spec.SortedKeys(s.Properties) {
		if unwritable(name, false) {
			// oapi-codegen checks the names below an x-go-type too: the schema is
			// emptied in place (every $ref to it sees it so), its description kept.
			*s = openapi3.Schema{Description: s.Description, Extensions: map[string]any{"x-go-type": "json.RawMessage"}}
			return &Degradation{Why: fmt.Sprintf("oapi-codegen cannot write the property name %s into Go (a quote, a backtick or a control character)", strconv.Quote(name)),
				Did: "types the object as json.RawMessage (validation and the fingerprint still read it whole)"}
		}
	}
	if unwritable(s.Format, false) {
		f := s.Format
		s.Format = ""
		return &Degradation{Why: fmt.Sprintf("oapi-codegen cannot write the format %s into Go", strconv.Quote(f)), Did: "leaves the format out of the base"}
	}
	if d := s.Discriminator; d != nil {
		bad := unwritable(d.PropertyName, false)
		for k := range d.Mapping {
			bad = bad || unwritable(k, true)
		}
		if bad {
			s.Discriminator = nil
			return &Degradation{Why: "oapi-codegen cannot write the discriminator's property name or a mapping key into Go (a quote, a backtick, a backslash or a control character)",
				Did: "generates the union without its discriminator (its JSON is the same)"}
		}
	}
	return nil
}
