package spec

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/speakeasy-api/openapi/overlay"
	"go.yaml.in/yaml/v4"
	yaml3 "gopkg.in/yaml.v3"
)

// This file applies OpenAPI Overlay documents to the source tree, with the library
// oapi-codegen applies its own overlays with (github.com/speakeasy-api/openapi/overlay),
// and keeps the position of everything an overlay wrote: a node an action's update
// inserted is reported at the overlay file's line and column (Source.Pos), not at a
// place in the spec that does not hold it.
//
// The library works on gopkg.in/yaml.v3 trees, and its merge copies an update's values
// without their positions (it keeps their comments). So the tree goes to yaml.v3 with a
// token in every node's line comment naming where the node comes from (a node of the
// spec, or a node of an action's update, with its overlay position), the actions are
// applied one at a time, and the tree comes back with the tokens read and the comments
// restored. A scalar of the spec whose value an action replaced in place is given to the
// action: the update's scalar of that value, else the update itself.

// overlayToken starts the line comment that names a node's origin while an overlay is
// applied; no comment the YAML parser reads starts with a NUL byte.
const overlayToken = "\x00idemgen:"

// origin is where a node of the yaml.v3 tree comes from.
type origin struct {
	spec    *yaml.Node  // the spec's node, or nil for an update's
	v3      *yaml3.Node // the yaml.v3 node first made for it (a copy gets a node of its own)
	pos     Pos         // an update's node: its position in the overlay file
	comment string      // an update's node: its line comment
	value   string      // the node's value when it was converted or marked
}

// overlayRun is the state of the overlays applied to one source.
type overlayRun struct {
	origins []origin
	v3      map[*yaml.Node]*yaml3.Node // spec nodes converted, for aliases
	back    map[*yaml3.Node]*yaml.Node // nodes converted back, for aliases
	used    map[int]bool               // spec origins already given back their own node
}

func (r *overlayRun) token(o origin) string {
	r.origins = append(r.origins, o)
	return overlayToken + strconv.Itoa(len(r.origins)-1)
}

// originOf returns the index of n's origin, or -1.
func originOf(n *yaml3.Node) int {
	if !strings.HasPrefix(n.LineComment, overlayToken) {
		return -1
	}
	i, err := strconv.Atoi(strings.TrimPrefix(n.LineComment, overlayToken))
	if err != nil {
		return -1
	}
	return i
}

// ApplyOverlays applies the overlay files to the tree, in order. An error is located in
// the overlay file (its YAML, its validation, an action whose target selects nothing).
func (s *Source) ApplyOverlays(files []string) error {
	if len(files) == 0 {
		return nil
	}
	r := &overlayRun{v3: map[*yaml.Node]*yaml3.Node{}, back: map[*yaml3.Node]*yaml.Node{}, used: map[int]bool{}}
	root := &yaml3.Node{Kind: yaml3.DocumentNode, Content: []*yaml3.Node{r.toV3(s.Root)}}
	for _, f := range files {
		if err := r.apply(root, f); err != nil {
			return err
		}
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml3.MappingNode {
		return &Error{Pos: Pos{File: files[len(files)-1]}, Msg: "the overlaid spec is not a mapping (an OpenAPI document is an object)"}
	}
	if s.origin == nil {
		s.origin = map[*yaml.Node]Pos{}
	}
	s.Root = r.fromV3(root.Content[0], s.origin)
	s.refs = nil // a new tree
	return nil
}

// apply applies the overlay file to root, one action at a time.
func (r *overlayRun) apply(root *yaml3.Node, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var tree yaml.Node // for a located syntax error, as the spec's
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return yamlError(file, data, err)
	}
	var doc yaml3.Node // the overlay's own tree, for the actions' positions
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return &Error{Pos: Pos{File: file}, Msg: err.Error()}
	}
	o, err := overlay.ParseReader(bytes.NewReader(data))
	if err != nil {
		return &Error{Pos: Pos{File: file}, Msg: "not an overlay: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if err := o.Validate(); err != nil {
		return &Error{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: "invalid overlay: " + err.Error()}
	}
	actions := overlayActions(&doc)
	for i := range o.Actions {
		a := &o.Actions[i]
		at := Pos{File: file}
		if i < len(actions) {
			at.Line, at.Col = actions[i].Line, actions[i].Column
			if _, t := entry3(actions[i], "target"); t != nil {
				at.Line, at.Col = t.Line, t.Column
			}
		}
		p, err := o.NewPath(a.Target, nil)
		if err != nil {
			return &Error{Pos: at, Msg: fmt.Sprintf("overlay action %d: target %q: %v", i+1, a.Target, err)}
		}
		targets := p.Query(root)
		if len(targets) == 0 {
			return &Error{Pos: at, Msg: fmt.Sprintf("overlay action %d: target %q selects nothing in the spec", i+1, a.Target)}
		}
		if !a.Update.IsZero() {
			r.mark(&a.Update, file)
		}
		one := *o
		one.Actions = o.Actions[i : i+1]
		if err := one.ApplyTo(root); err != nil {
			return &Error{Pos: at, Msg: fmt.Sprintf("overlay action %d: %v", i+1, err)}
		}
		if !a.Remove && !a.Update.IsZero() {
			for _, t := range targets {
				r.claimReplaced(t, &a.Update)
			}
		}
	}
	return nil
}

// overlayActions returns the nodes of the overlay's actions, in order.
func overlayActions(doc *yaml3.Node) []*yaml3.Node {
	root := doc
	if root.Kind == yaml3.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if _, seq := entry3(root, "actions"); seq != nil && seq.Kind == yaml3.SequenceNode {
		return seq.Content
	}
	return nil
}

func entry3(n *yaml3.Node, key string) (k, v *yaml3.Node) {
	if n == nil || n.Kind != yaml3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// mark gives every node of an update its origin: its position in the overlay file.
func (r *overlayRun) mark(n *yaml3.Node, file string) {
	if originOf(n) >= 0 {
		return
	}
	n.LineComment = r.token(origin{pos: Pos{File: file, Line: n.Line, Col: n.Column}, comment: n.LineComment, value: n.Value})
	for _, c := range n.Content {
		r.mark(c, file)
	}
}

// claimReplaced gives the action every scalar below t (of the spec, or of an earlier
// action) whose value it
// replaced in place: the update's scalar of the same value, else the update.
func (r *overlayRun) claimReplaced(t, update *yaml3.Node) {
	var visit func(n *yaml3.Node)
	visit = func(n *yaml3.Node) {
		if i := originOf(n); i >= 0 && n.Kind == yaml3.ScalarNode && n.Value != r.origins[i].value {
			from := findScalar(update, n.Value)
			if from == nil {
				from = update
			}
			n.LineComment = from.LineComment
		}
		for _, c := range n.Content {
			visit(c)
		}
	}
	visit(t)
}

func findScalar(n *yaml3.Node, value string) *yaml3.Node {
	if n.Kind == yaml3.ScalarNode && n.Value == value {
		return n
	}
	for i, c := range n.Content {
		if n.Kind == yaml3.MappingNode && i%2 == 0 {
			continue // a key's value is not the value of a field
		}
		if f := findScalar(c, value); f != nil {
			return f
		}
	}
	return nil
}

// toV3 converts the spec's tree, each node tokened with its origin.
func (r *overlayRun) toV3(n *yaml.Node) *yaml3.Node {
	if c, ok := r.v3[n]; ok {
		return c
	}
	c := &yaml3.Node{Kind: kind3(n.Kind), Style: style3(n.Style), Tag: n.Tag, Value: n.Value, Anchor: n.Anchor,
		HeadComment: n.HeadComment, FootComment: n.FootComment, Line: n.Line, Column: n.Column}
	r.v3[n] = c
	c.LineComment = r.token(origin{spec: n, v3: c, value: n.Value})
	if n.Alias != nil {
		c.Alias = r.toV3(n.Alias)
	}
	for _, sub := range n.Content {
		c.Content = append(c.Content, r.toV3(sub))
	}
	return c
}

// fromV3 converts the overlaid tree back: the spec's nodes are its own (updated in place),
// the others new, an update's recorded in at with its overlay position.
func (r *overlayRun) fromV3(c *yaml3.Node, at map[*yaml.Node]Pos) *yaml.Node {
	if n, ok := r.back[c]; ok {
		return n
	}
	var n *yaml.Node
	i := originOf(c)
	comment := ""
	switch {
	case i >= 0 && r.origins[i].spec != nil && r.origins[i].v3 == c && !r.used[i]:
		r.used[i] = true
		n = r.origins[i].spec
		comment = n.LineComment
	case i >= 0 && r.origins[i].spec != nil: // a copy of a spec node (a copy action)
		orig := r.origins[i].spec
		n = &yaml.Node{Line: orig.Line, Column: orig.Column}
		comment = orig.LineComment
	case i >= 0:
		n = &yaml.Node{Line: r.origins[i].pos.Line, Column: r.origins[i].pos.Col}
		comment = r.origins[i].comment
		at[n] = r.origins[i].pos
	default:
		n = &yaml.Node{Line: c.Line, Column: c.Column}
		comment = c.LineComment
	}
	r.back[c] = n
	n.Kind, n.Style, n.Tag, n.Value, n.Anchor = kind4(c.Kind), style4(c.Style), c.Tag, c.Value, c.Anchor
	n.HeadComment, n.LineComment, n.FootComment = c.HeadComment, comment, c.FootComment
	n.Alias = nil
	if c.Alias != nil {
		n.Alias = r.fromV3(c.Alias, at)
	}
	content := make([]*yaml.Node, 0, len(c.Content))
	for _, sub := range c.Content {
		content = append(content, r.fromV3(sub, at))
	}
	n.Content = content
	return n
}

func kind3(k yaml.Kind) yaml3.Kind {
	switch k {
	case yaml.DocumentNode:
		return yaml3.DocumentNode
	case yaml.SequenceNode:
		return yaml3.SequenceNode
	case yaml.MappingNode:
		return yaml3.MappingNode
	case yaml.ScalarNode:
		return yaml3.ScalarNode
	case yaml.AliasNode:
		return yaml3.AliasNode
	}
	return 0
}

func kind4(k yaml3.Kind) yaml.Kind {
	switch k {
	case yaml3.DocumentNode:
		return yaml.DocumentNode
	case yaml3.SequenceNode:
		return yaml.SequenceNode
	case yaml3.MappingNode:
		return yaml.MappingNode
	case yaml3.ScalarNode:
		return yaml.ScalarNode
	case yaml3.AliasNode:
		return yaml.AliasNode
	}
	return 0
}

var styles = [...]struct {
	v4 yaml.Style
	v3 yaml3.Style
}{
	{yaml.TaggedStyle, yaml3.TaggedStyle}, {yaml.DoubleQuotedStyle, yaml3.DoubleQuotedStyle},
	{yaml.SingleQuotedStyle, yaml3.SingleQuotedStyle}, {yaml.LiteralStyle, yaml3.LiteralStyle},
	{yaml.FoldedStyle, yaml3.FoldedStyle}, {yaml.FlowStyle, yaml3.FlowStyle},
}

func style3(s yaml.Style) yaml3.Style {
	var out yaml3.Style
	for _, m := range styles {
		if s&m.v4 != 0 {
			out |= m.v3
		}
	}
	return out
}

func style4(s yaml3.Style) yaml.Style {
	var out yaml.Style
	for _, m := range styles {
		if s&m.v3 != 0 {
			out |= m.v4
		}
	}
	return out
}

// encode returns the tree as YAML (block style), for kin-openapi and the spec file.
func (s *Source) encode() ([]byte, error) {
	root := copyNode(s.Root, nil)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
