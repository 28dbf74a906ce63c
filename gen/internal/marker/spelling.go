package marker

import (
	"slices"
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
		item, _ := s.PathItem(paths.Content[i+1])
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
// path item that is a $ref to another file. Ignoring them would leave a marked operation
// without idempotency. It returns the operations of such path items that the defaults'
// methods would mark (and no x-idempotent: false opts out), which stay unmarked, each at
// its path item's $ref.
func (s *Source) CheckRefPathItems(doc *openapi3.T, defaults Marker, errs *spec.ErrorList) (unmarked []RefOp) {
	_, paths := s.Lookup("paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		path := paths.Content[i].Value
		local, ref := s.PathItem(paths.Content[i+1])
		item := doc.Paths.Value(path)
		if ref == nil || local != nil || item == nil {
			continue
		}
		for _, method := range spec.SortedKeys(item.Operations()) {
			v, ok := item.Operations()[method].Extensions[MarkerExt]
			switch {
			case ok && v != false:
				errs.Add(s.Pos(ref), "%s: %s %s is marked in the path item this $ref names, in another file; idemgen reads markers in the spec file only: move the path item into this file (or under its components, with a $ref to it)", MarkerExt, method, path)
			case !ok && slices.Contains(defaults.methods.V, strings.ToLower(method)):
				unmarked = append(unmarked, RefOp{Method: method, Path: path, Ref: ref.Value, Pos: s.Pos(ref)})
			}
		}
	}
	return unmarked
}

// RefOp is an operation of a path item in another file: Ref is the path item's $ref, Pos
// its place. Method is upper case.
type RefOp struct {
	Method, Path, Ref string
	Pos               spec.Pos
}
