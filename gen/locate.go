package gen

import (
	"fmt"
	"net/url"
	"strings"

	"gopkg.in/yaml.v3"
)

// source is the spec file as a YAML node tree (JSON is read as YAML), kept to give
// errors the line and column of what they are about. kin-openapi's origins
// (IncludeOrigin) stop at extension values, which decode to plain Go values; the marker's
// own fields are found here.
type source struct {
	file string // as given on the command line, for messages
	root *yaml.Node
}

func parseSource(file string, data []byte) (*source, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(file, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Pos: Pos{File: file, Line: root.Line, Col: root.Column}, Msg: "the spec is not a mapping (an OpenAPI document is an object)"}
	}
	return &source{file: file, root: root}, nil
}

// yamlError turns "yaml: line 12: did not find expected key" into a located error.
func yamlError(file string, err error) error {
	msg := err.Error()
	var line int
	if _, scanErr := fmt.Sscanf(msg, "yaml: line %d:", &line); scanErr == nil {
		if _, rest, ok := strings.Cut(msg, ": "); ok {
			if _, rest2, ok := strings.Cut(rest, ": "); ok {
				return &Error{Pos: Pos{File: file, Line: line}, Msg: rest2}
			}
		}
	}
	return &Error{Pos: Pos{File: file}, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// checkVersion rejects documents that are not OpenAPI 3.0 or 3.1 (Swagger 2.0, other YAML).
func (s *source) checkVersion() error {
	_, v := s.lookup("openapi")
	if v == nil {
		if k, sv := s.lookup("swagger"); sv != nil {
			return &Error{Pos: s.pos(k), Msg: fmt.Sprintf("swagger %q: a Swagger 2.0 document; idemgen reads OpenAPI 3.0 and 3.1 (convert it first)", sv.Value)}
		}
		return &Error{Pos: s.pos(s.root), Msg: `not an OpenAPI document: no "openapi" field at the root`}
	}
	if !strings.HasPrefix(v.Value, "3.") {
		return &Error{Pos: s.pos(v), Msg: fmt.Sprintf("openapi %q: idemgen reads OpenAPI 3.0 and 3.1", v.Value)}
	}
	return nil
}

// pos is the position of n.
func (s *source) pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: s.file}
	}
	return Pos{File: s.file, Line: n.Line, Col: n.Column}
}

// entry returns the key and value nodes of key in mapping n (nil, nil when absent).
func entry(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// lookup follows keys from the root and returns the key and value nodes of the last one.
func (s *source) lookup(keys ...string) (k, v *yaml.Node) {
	v = s.root
	for _, key := range keys {
		k, v = entry(v, key)
		if v == nil {
			return nil, nil
		}
	}
	return k, v
}

// resolvePointer resolves a local JSON pointer fragment ("#/components/schemas/Pet").
func (s *source) resolvePointer(ref string) (*yaml.Node, bool) {
	frag, err := url.PathUnescape(strings.TrimPrefix(ref, "#"))
	if err != nil {
		return nil, false
	}
	n := s.root
	if frag == "" {
		return n, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch n.Kind {
		case yaml.MappingNode:
			_, n = entry(n, tok)
		case yaml.SequenceNode:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(n.Content) {
				return nil, false
			}
			n = n.Content[i]
		default:
			return nil, false
		}
		if n == nil {
			return nil, false
		}
		for n.Kind == yaml.AliasNode {
			n = n.Alias
		}
	}
	return n, true
}

// checkRefs reports every local $ref ("#/...") that does not resolve, with its location:
// kin-openapi would fail on the first one without saying where it is.
func (s *source) checkRefs(errs *ErrorList) {
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "$ref" && v.Kind == yaml.ScalarNode && strings.HasPrefix(v.Value, "#") {
					if _, ok := s.resolvePointer(v.Value); !ok {
						errs.add(s.pos(v), "$ref %q does not resolve: nothing at that path in this document", v.Value)
					}
					continue
				}
				walk(v)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		}
	}
	walk(s.root)
}

// locateLoadError gives a kin-openapi load error the position of the $ref it names, when
// it names one ("error resolving reference \"x.yaml#/A\": ..."); else the file alone.
func (s *source) locateLoadError(err error) *Error {
	msg := err.Error()
	var found *yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if found != nil {
			return
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "$ref" && v.Kind == yaml.ScalarNode && strings.Contains(msg, fmt.Sprintf("%q", v.Value)) {
					found = v
					return
				}
				walk(v)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		}
	}
	walk(s.root)
	if found == nil {
		return &Error{Pos: Pos{File: s.file}, Msg: msg}
	}
	return &Error{Pos: s.pos(found), Msg: msg}
}
