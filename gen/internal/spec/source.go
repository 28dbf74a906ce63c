package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Source is the spec file as a YAML node tree (JSON is read as YAML), kept to give
// errors the line and column of what they are about. kin-openapi's origins stop at
// extension values, which decode to plain Go values; the markers' own fields, duplicate
// keys and $refs are found here.
type Source struct {
	file string     // as given on the command line, for messages
	Root *yaml.Node // the document node's content: the root mapping
	JSON bool       // the file is JSON
	// origin holds the nodes an overlay wrote (ApplyOverlays), at their place in the
	// overlay file.
	origin map[*yaml.Node]Pos
	// refs is what CheckTree found of the document's $refs (nil before it runs).
	refs *refKinds
}

// refKinds says which kinds of $ref a document has.
type refKinds struct {
	external bool // to another file
	deep     bool // a local one that names no components/<kind>/<name> entry
}

// kinds returns the kinds of $ref in the document: CheckTree's, or a walk of the tree.
func (s *Source) kinds() refKinds {
	if s.refs != nil {
		return *s.refs
	}
	var k refKinds
	walk(s.Root, func(key, n *yaml.Node) { k.add(key, n) })
	return k
}

// add counts n when it is the value of a $ref (key).
func (k *refKinds) add(key, n *yaml.Node) {
	if key == nil || key.Value != "$ref" || n.Kind != yaml.ScalarNode {
		return
	}
	if !strings.HasPrefix(n.Value, "#") {
		k.external = true
		return
	}
	if parts := strings.Split(strings.TrimPrefix(n.Value, "#/"), "/"); len(parts) != 3 || parts[0] != "components" {
		k.deep = true
	}
}

// DeepRefs reports a local $ref anywhere in the document that names no
// components/<kind>/<name> entry (a bundler's "#/paths/~1a/get/parameters/1", a schema's
// "#/components/schemas/Order/properties/status").
func (s *Source) DeepRefs() bool { return s.kinds().deep }

// ParseSource parses data (YAML or JSON) into a node tree. A syntax error is a located
// *Error. JSON is read with encoding/json's tokenizer: it is a YAML subset, but the YAML
// parser is several times slower on it and refuses valid JSON escapes (UTF-16 surrogate
// pairs such as "\ud83d\udc4d").
func ParseSource(file string, data []byte) (*Source, error) {
	var root *yaml.Node
	if jsonText(data) {
		var err error
		if root, err = jsonTree(file, data); err != nil {
			return nil, err
		}
	} else {
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, yamlError(file, data, err)
		}
		root = &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
			root = root.Content[0]
		}
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Pos: Pos{File: file, Line: root.Line, Col: root.Column}, Msg: "the spec is not a mapping (an OpenAPI document is an object)"}
	}
	return &Source{file: file, Root: root, JSON: root.Style&yaml.FlowStyle != 0}, nil
}

// jsonTree builds the node tree of a JSON document from encoding/json's tokens, with
// positions (byte columns). Keys given twice are kept, for CheckTree to report.
func jsonTree(file string, data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lines := lineStarts(data)
	at := func(off int64) (int, int) {
		for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
			off++ // InputOffset is the end of the previous token
		}
		l := sort.Search(len(lines), func(i int) bool { return lines[i] > int(off) })
		return l, int(off) - lines[l-1] + 1
	}
	located := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			l, c := at(max(se.Offset-1, 0))
			return &Error{Pos: Pos{File: file, Line: l, Col: c}, Msg: se.Error()}
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			l, c := at(int64(max(len(data)-1, 0)))
			return &Error{Pos: Pos{File: file, Line: l, Col: c}, Msg: "unexpected end of JSON input"}
		}
		return &Error{Pos: Pos{File: file}, Msg: err.Error()}
	}
	var value func() (*yaml.Node, error)
	value = func() (*yaml.Node, error) {
		l, c := at(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, located(err)
		}
		n := &yaml.Node{Line: l, Column: c, Style: yaml.FlowStyle}
		switch v := tok.(type) {
		case json.Delim:
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
			if v == '[' {
				n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
			}
			for dec.More() {
				if n.Kind == yaml.MappingNode {
					k, err := value()
					if err != nil {
						return nil, err
					}
					n.Content = append(n.Content, k)
				}
				c, err := value()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, c)
			}
			if _, err := dec.Token(); err != nil { // the closing delimiter
				return nil, located(err)
			}
		case string:
			n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!str", v
		case json.Number:
			n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!int", v.String()
			if strings.ContainsAny(v.String(), ".eE") {
				n.Tag = "!!float"
			}
		case bool:
			n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!bool", fmt.Sprint(v)
		case nil:
			n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!null", "null"
		}
		return n, nil
	}
	root, err := value()
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		l, c := at(dec.InputOffset())
		return nil, &Error{Pos: Pos{File: file, Line: l, Col: c}, Msg: "data after the end of the JSON document"}
	}
	return root, nil
}

// lineStarts returns the offset of the first byte of every line.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// yamlError turns a YAML syntax error into a located *Error.
func yamlError(file string, data []byte, err error) error {
	var le *yaml.LoadError
	if errors.As(err, &le) && le.Mark.Line > 0 {
		var notes []string
		line, col := le.Mark.Line, le.Mark.Column
		if l, c, ok := ranOn(data, le); ok {
			notes = append(notes, fmt.Sprintf("noticed at %d:%d", line, col))
			line, col = l, c
		}
		if le.ContextMsg != "" && le.ContextMark.Line > 0 {
			notes = append(notes, fmt.Sprintf("%s at %d:%d", le.ContextMsg, le.ContextMark.Line, le.ContextMark.Column))
		}
		msg := le.Message
		if len(notes) > 0 {
			msg += " (" + strings.Join(notes, ", ") + ")"
		}
		return &Error{Pos: Pos{File: file, Line: line, Col: col}, Msg: msg}
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
		if _, rest, ok := strings.Cut(msg, ": "); ok {
			return &Error{Pos: Pos{File: file, Line: line}, Msg: rest}
		}
	}
	return &Error{Pos: Pos{File: file}, Msg: msg}
}

// ranOn locates a YAML syntax error whose mistake is on an earlier line than the place
// the parser noticed it: it returns the end of the last line with content before the
// mark. Two cases, both "did not find expected ...": a flow collection opened on an
// earlier line and not closed ({required: true<newline>responses: ...: the '}' is
// missing at the end of the line before), and a quoted scalar that ran on from an earlier
// line (title: "t<newline>version: "1": the closing quote is missing there). A mark at the
// first token of its line is the line's own mistake (a key indented wrongly) and stays.
func ranOn(data []byte, le *yaml.LoadError) (line, col int, ok bool) {
	if !strings.HasPrefix(le.Message, "did not find expected") {
		return 0, 0, false
	}
	lines := strings.Split(string(data), "\n")
	ml := le.Mark.Line
	if ml < 2 || ml > len(lines) {
		return 0, 0, false
	}
	text := []rune(strings.TrimRight(lines[ml-1], "\r"))
	first := 0
	for first < len(text) && (text[first] == ' ' || text[first] == '\t') {
		first++
	}
	before := text[:min(max(le.Mark.Column-1, 0), len(text))]
	flow := strings.Contains(le.Message, "',' or '}'") || strings.Contains(le.Message, "',' or ']'")
	switch {
	case le.Mark.Column-1 <= first: // the mark is the line's first token
		return 0, 0, false
	case flow && le.ContextMark.Line > 0 && le.ContextMark.Line < ml:
	case strings.Count(string(before), `"`)%2 == 1 || strings.Count(string(before), "'")%2 == 1:
	default:
		return 0, 0, false
	}
	for l := ml - 1; l >= 1; l-- {
		t := strings.TrimRight(lines[l-1], " \t\r")
		if trimmed := strings.TrimSpace(t); trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		return l, len([]rune(t)), true
	}
	return 0, 0, false
}

// ExternalRefs reports a $ref to another file anywhere in the document.
func (s *Source) ExternalRefs() bool { return s.kinds().external }

// Pos is the position of n.
func (s *Source) Pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: s.file}
	}
	if p, ok := s.origin[n]; ok {
		return p
	}
	return Pos{File: s.file, Line: n.Line, Col: n.Column}
}

// Entry returns the key and value nodes of key in mapping n (nil, nil when absent).
func Entry(n *yaml.Node, key string) (k, v *yaml.Node) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], Deref(n.Content[i+1])
		}
	}
	return nil, nil
}

// Deref follows YAML aliases.
func Deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// Lookup follows keys from the root and returns the key and value nodes of the last one.
// A key that is a number selects an item of a sequence ("parameters", "0"); the item is
// its own key node.
func (s *Source) Lookup(keys ...string) (k, v *yaml.Node) {
	v = s.Root
	for _, key := range keys {
		if v.Kind == yaml.SequenceNode {
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(v.Content) {
				return nil, nil
			}
			k, v = v.Content[i], Deref(v.Content[i])
			continue
		}
		k, v = Entry(v, key)
		if v == nil {
			return nil, nil
		}
	}
	return k, v
}

// PosOf is the position of the deepest node the tree has along keys (as Lookup follows
// them): the place itself, or the nearest one above it that the file writes (a schema
// reached through a $ref, a place an overlay wrote); the file alone when not even the
// first key is there.
func (s *Source) PosOf(keys ...string) Pos {
	for n := len(keys); n > 0; n-- {
		if k, _ := s.Lookup(keys[:n]...); k != nil {
			return s.Pos(k)
		}
	}
	return Pos{File: s.file}
}

// resolvePointer resolves a local JSON pointer fragment ("#/components/schemas/Pet").
func (s *Source) resolvePointer(ref string) (*yaml.Node, bool) {
	frag, err := url.PathUnescape(strings.TrimPrefix(ref, "#"))
	if err != nil {
		return nil, false
	}
	n := s.Root
	if frag == "" {
		return n, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = UnescapePointer(tok)
		switch n.Kind {
		case yaml.MappingNode:
			_, n = Entry(n, tok)
		case yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil, false
			}
			n = Deref(n.Content[i])
		default:
			return nil, false
		}
		if n == nil {
			return nil, false
		}
	}
	return n, true
}

// Resolve returns n, or what it points to when n is a mapping holding a local $ref (one
// level, as the spec allows for parameters, request bodies and responses).
func (s *Source) Resolve(n *yaml.Node) *yaml.Node {
	for range 8 { // a $ref to a $ref: follow a few, never loop
		_, ref := Entry(n, "$ref")
		if ref == nil || !strings.HasPrefix(ref.Value, "#") {
			return n
		}
		t, ok := s.resolvePointer(ref.Value)
		if !ok {
			return n
		}
		n = t
	}
	return n
}

var pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")

// UnescapePointer decodes one reference token of a JSON pointer (RFC 6901: ~1 is /, ~0 is ~).
func UnescapePointer(tok string) string { return pointerUnescaper.Replace(tok) }

// walk calls f for every node of the tree below n (n included), depth first in file order,
// with the key node of mapping values (nil for sequence items and the root).
func walk(n *yaml.Node, f func(key, n *yaml.Node)) {
	var visit func(key, n *yaml.Node)
	visit = func(key, n *yaml.Node) {
		f(key, n)
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
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

// jsonText reports whether data is read as JSON (ParseSource): its first byte past
// whitespace opens an object.
func jsonText(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
