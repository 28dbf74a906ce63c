package spec

import (
	"net/url"
	"strings"

	"go.yaml.in/yaml/v4"
)

// PathItem returns the path item that n, a value of the paths mapping, is: n itself, or,
// when n is a $ref, the path item it names in this file (a "#/..." pointer, followed a
// few levels) and the $ref's value node. item is nil when the $ref names another file,
// or nothing: kin-openapi loads (or reports) those.
func (s *Source) PathItem(n *yaml.Node) (item, ref *yaml.Node) {
	n = Deref(n)
	_, ref = Entry(n, "$ref")
	if ref == nil {
		return n, nil
	}
	if !strings.HasPrefix(ref.Value, "#") {
		return nil, ref
	}
	item = s.Resolve(n)
	if _, r := Entry(item, "$ref"); r != nil || item.Kind != yaml.MappingNode {
		return nil, ref
	}
	return item, ref
}

// Operation returns the key and value nodes of the method (lower case) of the path item
// of path, where the operation is written: through a path item's local $ref.
func (s *Source) Operation(path, method string) (k, v *yaml.Node) {
	_, n := s.Lookup("paths", path)
	item, _ := s.PathItem(n)
	return Entry(item, method)
}

// OperationAt is where the operation method (lower case) of the path item of path is
// written in this file, as the keys from the root ("paths", "/pets", "post"), through a
// path item's local $ref ("components", "pathItems", "Pets", "post"). It is nil when the
// path item is in another file, or there is no such operation.
func (s *Source) OperationAt(path, method string) []string {
	_, n := s.Lookup("paths", path)
	at := []string{"paths", path}
	for range 8 { // as Resolve follows them
		_, ref := Entry(n, "$ref")
		if ref == nil {
			if _, op := Entry(n, method); op == nil {
				return nil
			}
			return append(at, method)
		}
		frag, err := url.PathUnescape(strings.TrimPrefix(ref.Value, "#"))
		t, ok := s.resolvePointer(ref.Value)
		if !strings.HasPrefix(ref.Value, "#/") || err != nil || !ok {
			return nil
		}
		n, at = t, nil
		for _, tok := range strings.Split(frag[1:], "/") {
			at = append(at, UnescapePointer(tok))
		}
	}
	return nil
}
