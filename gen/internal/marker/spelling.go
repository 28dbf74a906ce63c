package marker

import (
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/idemgen/idemgen/internal/cliflag"
)

// This file reports misspelled marker extensions. idemgen reads x-idempotent and
// x-idempotent-defaults by their exact names, and any other key is another tool's: a
// typo would turn the protocol off for an operation, or drop the defaults, without a
// word.

// readExtensions are the extensions idemgen reads, each with what a misspelling of it
// loses.
var readExtensions = []struct{ name, loss string }{
	{MarkerExt, "an operation without the marker runs without the protocol"},
	{DefaultsExt, "without it the defaults apply to no operation"},
}

// misspelledExt returns the extension idemgen reads that key misspells, with what the
// misspelling loses: the same name in another case, or one edit (an insertion, deletion,
// substitution or transposition) away once case is ignored. ok is false for the names
// themselves and for keys two edits away or more, such as other tools' x-idempotency
// and x-idempotency-key.
func misspelledExt(key string) (name, loss string, ok bool) {
	for _, e := range readExtensions {
		if key == e.name {
			return "", "", false
		}
	}
	lower := strings.ToLower(key)
	for _, e := range readExtensions {
		if cliflag.Distance(lower, e.name) <= 1 {
			return e.name, e.loss, true
		}
	}
	return "", "", false
}

// CheckSpelling reports every key that misspells a marker extension where idemgen reads
// one or a user may put one: at the document root, on a path item and on an operation.
func (s *Source) CheckSpelling(errs *spec.ErrorList) {
	s.checkKeys(s.Root, errs)
	_, paths := s.Lookup("paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		item := spec.Deref(paths.Content[i+1])
		if item == nil || item.Kind != yaml.MappingNode {
			continue
		}
		s.checkKeys(item, errs)
		for j := 0; j+1 < len(item.Content); j += 2 {
			if spec.HTTPMethods[strings.ToLower(item.Content[j].Value)] {
				s.checkKeys(spec.Deref(item.Content[j+1]), errs)
			}
		}
	}
}

// checkKeys reports the keys of the mapping n that misspell a marker extension, each at
// its key.
func (s *Source) checkKeys(n *yaml.Node, errs *spec.ErrorList) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if name, loss, ok := misspelledExt(k.Value); ok {
			errs.Add(s.Pos(k), "unknown extension %s, did you mean %s? (%s)", k.Value, name, loss)
		}
	}
}

// CheckRefPathItems reports markers that ReadMarkers could not see: on the operations of a
// path item that is a $ref (to another file, or to components/pathItems). Ignoring them
// would leave a marked operation without idempotency.
func (s *Source) CheckRefPathItems(doc *openapi3.T, errs *spec.ErrorList) {
	_, paths := s.Lookup("paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		path := paths.Content[i].Value
		_, ref := spec.Entry(paths.Content[i+1], "$ref")
		item := doc.Paths.Value(path)
		if ref == nil || item == nil {
			continue
		}
		for _, method := range spec.SortedKeys(item.Operations()) {
			if v, ok := item.Operations()[method].Extensions[MarkerExt]; ok && v != false {
				errs.Add(s.Pos(ref), "%s: %s %s is marked in the path item this $ref names; idemgen reads markers in the spec file only: move the path item here", MarkerExt, method, path)
			}
		}
	}
}
