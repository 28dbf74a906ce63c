package spec

import (
	"bytes"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Bundlers (tools that merge a multi-file spec into one) emit, where OpenAPI wants a
// content map (media type → media type object), a $ref to one kept under components:
//
//	content: {$ref: '#/components/mediaTypes/OrderJSON'}
//	components: {mediaTypes: {OrderJSON: {application/json: {schema: ...}}}}
//
// That is not OpenAPI 3.0 or 3.1 (content takes no $ref), and kin-openapi refuses it
// without a position. OpenAPI 3.2 writes a $ref per media type instead
// (content: {application/json: {$ref: '#/components/mediaTypes/Order'}}), which
// kin-openapi's model drops silently: the body would lose its schema. idemgen resolves
// both when the target is what belongs there (a content map, a media type object) in
// this document, in the document kin-openapi loads (never in the file); any other such
// $ref is a located error, each one in the same run.

// contentRef is a `content: {$ref: ...}` of the document, or a media type object that is
// a $ref (`content: {application/json: {$ref: ...}}`, OpenAPI 3.2's components/mediaTypes,
// which kin-openapi's 3.0/3.1 model drops without a word: the body would lose its schema).
type contentRef struct {
	holder *yaml.Node // the mapping holding the $ref: the content map, or the media type object
	ref    *yaml.Node // the $ref's value
	whole  bool       // the $ref stands for the whole content map
	target *yaml.Node // what it names, when that is what belongs there; else nil
}

// contentRefs returns the document's content $refs, in file order: in the content fields
// of request bodies, responses, parameters and headers, never in a schema property that
// happens to be named content (schemas, examples and extensions are not searched).
func (s *Source) contentRefs() []contentRef {
	var out []contentRef
	walkOutsideSchemas(s.Root, func(key, n *yaml.Node) {
		if key == nil || key.Value != "content" || n.Kind != yaml.MappingNode {
			return
		}
		if ref := onlyRef(n); ref != nil {
			c := contentRef{holder: n, ref: ref, whole: true}
			if t, ok := s.resolveLocal(ref.Value); ok && isContentMap(t) {
				c.target = t
			}
			out = append(out, c)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			mt := Deref(n.Content[i+1])
			ref := onlyRef(mt)
			if ref == nil {
				continue
			}
			c := contentRef{holder: mt, ref: ref}
			if t, ok := s.resolveLocal(ref.Value); ok && Deref(t).Kind == yaml.MappingNode && !isContentMap(t) {
				c.target = t
			}
			out = append(out, c)
		}
	})
	return out
}

// onlyRef returns the value of the $ref of a mapping that holds a $ref and nothing else.
func onlyRef(n *yaml.Node) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode || len(n.Content) != 2 || n.Content[0].Value != "$ref" {
		return nil
	}
	if ref := Deref(n.Content[1]); ref.Kind == yaml.ScalarNode {
		return ref
	}
	return nil
}

// resolveLocal resolves a local $ref ("#/..."); other $refs resolve to nothing here.
func (s *Source) resolveLocal(ref string) (*yaml.Node, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	return s.resolvePointer(ref)
}

// isContentMap reports whether n maps media types ("application/json", "text/*") to
// objects.
func isContentMap(n *yaml.Node) bool {
	n = Deref(n)
	if n == nil || n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], Deref(n.Content[i+1])
		if !strings.Contains(k.Value, "/") || v == nil || v.Kind != yaml.MappingNode {
			return false
		}
	}
	return true
}

// CheckContentRefs reports every content $ref idemgen cannot resolve: one that names no
// content map (for content itself) or no media type object (for a media type) of this
// document. A local $ref that names nothing is CheckTree's.
func (s *Source) CheckContentRefs(errs *ErrorList) {
	for _, c := range s.contentRefs() {
		if c.target != nil {
			continue
		}
		_, ok := s.resolveLocal(c.ref.Value)
		if !ok && strings.HasPrefix(c.ref.Value, "#") {
			continue // CheckTree: does not resolve
		}
		switch {
		case !ok:
			errs.Add(s.Pos(c.ref), "content: $ref %q is not in this document; OpenAPI takes no $ref for content or a media type: write them inline", c.ref.Value)
		case c.whole:
			errs.Add(s.Pos(c.ref), "content: $ref %q names no content map (media type → media type object): which media type it is for is unknown; OpenAPI takes no $ref for content: write the media types inline, or point the $ref at a content map", c.ref.Value)
		default:
			errs.Add(s.Pos(c.ref), "content: media type $ref %q names no media type object (schema, example, encoding): write it inline, or point the $ref at one", c.ref.Value)
		}
	}
}

// inlineContentRefs returns the document as YAML with every resolvable content $ref
// replaced by a copy of its target, and whether there was any; the source tree is left
// as it is (positions stay the file's).
func (s *Source) inlineContentRefs() ([]byte, bool, error) {
	refs := s.contentRefs()
	subst := map[*yaml.Node]*yaml.Node{}
	for _, c := range refs {
		if c.target != nil {
			subst[c.holder] = c.target
		}
	}
	if len(subst) == 0 {
		return nil, false, nil
	}
	root := copyNode(s.Root, subst)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	if err := enc.Encode(root); err != nil {
		return nil, false, err
	}
	if err := enc.Close(); err != nil {
		return nil, false, err
	}
	return b.Bytes(), true, nil
}

// copyNode returns a deep copy of n (aliases followed), each node of subst replaced by a
// copy of its substitute.
func copyNode(n *yaml.Node, subst map[*yaml.Node]*yaml.Node) *yaml.Node {
	n = Deref(n)
	if t, ok := subst[n]; ok {
		n = Deref(t)
	}
	c := *n
	c.Alias, c.Anchor = nil, ""
	if c.Kind == yaml.AliasNode {
		c.Kind = yaml.ScalarNode
	}
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, sub := range n.Content {
			c.Content[i] = copyNode(sub, subst)
		}
	}
	c.Style &^= yaml.FlowStyle // block style: a JSON tree encodes as readable YAML
	return &c
}

// walkOutsideSchemas is walk, except that it does not descend into schemas (schema,
// schemas), examples (example, examples) or extensions (x-...): what is below them is
// data, not OpenAPI objects.
func walkOutsideSchemas(n *yaml.Node, f func(key, n *yaml.Node)) {
	var visit func(key, n *yaml.Node)
	visit = func(key, n *yaml.Node) {
		n = Deref(n)
		if n == nil {
			return
		}
		f(key, n)
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				switch k := n.Content[i].Value; {
				case k == "schema", k == "schemas", k == "example", k == "examples", strings.HasPrefix(k, "x-"):
					continue
				}
				visit(n.Content[i], n.Content[i+1])
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				visit(nil, c)
			}
		}
	}
	visit(nil, n)
}
