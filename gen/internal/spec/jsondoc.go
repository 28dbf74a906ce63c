package spec

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"
)

// decodeJSONDoc returns kin-openapi's document of a JSON spec decoded from the source's
// own node tree (jsonTree's), instead of from the tree kin-openapi's loader would parse
// again. The loader reads JSON with its YAML parser, whose peak heap is about four times
// the tree it returns (106 MB live for sentry.json's 3.9 MB, against 24 MB for the tree):
// decoding the tree idemgen holds anyway skips that parse and its peak, which was the
// run's peak memory on every large JSON spec, and its CPU time.
//
// The loader does the same work on the same tree: it decodes its YAML parser's tree
// into the document through the same UnmarshalYAML methods (its scalar preparation
// changes nothing in a JSON tree: no local tags, timestamps, infinities or non-string
// keys), then resolves the $refs with ResolveRefsIn; the trees are the same
// (FuzzJSONTree) but for a number YAML resolves otherwise than jsonTree tags it
// (treeReadsAsYAML). For such a number, for a $ref to another file (resolved against
// the document's location; load does not call this for a text with one, see
// externalRefText), and when decoding or resolving fails (for the loader's own error),
// the loader reads the data itself.
//
// One difference, decided: a text the loader's YAML parser refuses (a UTF-16 surrogate
// pair escaped, "\ud83d\udc4d", as JSON encoders write emoji; a byte that is not UTF-8)
// or reads otherwise (a raw U+0085, a line break to YAML) the loader decodes with
// encoding/json, whose numbers are all float64. The tree has the same strings as
// encoding/json and its numbers typed as YAML types them, so such a spec decodes as the
// same document written without the escapes would: an integer in an extension, an
// example, a default or an enum is an int, as in every other spec. (The corpus and the
// goldens generate byte-identically either way: the generated code does not show it.)
func (s *Source) decodeJSONDoc(path string, data []byte) (*openapi3.T, error) {
	if !treeReadsAsYAML(s.Root) || s.ExternalRefs() {
		return LoadDoc(path, data)
	}
	doc := &openapi3.T{}
	if err := s.Root.Decode(doc); err != nil {
		return LoadDoc(path, data)
	}
	if err := newLoader().ResolveRefsIn(doc, nil); err != nil {
		return LoadDoc(path, data)
	}
	return doc, nil
}

// externalRefText reports whether the JSON text data may hold a $ref to another file: a
// "$ref" key whose value does not start with "#". load reads such a spec with
// kin-openapi's loader before it builds the source's tree, as it reads YAML, so that the
// loader's parse and the tree are never alive together.
func externalRefText(data []byte) bool {
	key := []byte(`"$ref"`)
	for rest := data; ; {
		i := bytes.Index(rest, key)
		if i < 0 {
			return false
		}
		rest = rest[i+len(key):]
		t := bytes.TrimLeft(rest, " \t\r\n")
		if len(t) == 0 || t[0] != ':' {
			continue // "$ref" as a value
		}
		if t = bytes.TrimLeft(t[1:], " \t\r\n"); !bytes.HasPrefix(t, []byte(`"#`)) {
			return true
		}
	}
}

// treeReadsAsYAML reports whether YAML's parser resolves every number of root, a tree of
// jsonTree's, as jsonTree tags it: -0 and integers beyond 64 bits are floats to YAML,
// 1e400 a string, and each would decode to another Go value.
func treeReadsAsYAML(root *yaml.Node) bool {
	ok := true
	walk(root, func(_, n *yaml.Node) {
		if ok && n.Kind == yaml.ScalarNode {
			ok = yamlNumber(n)
		}
	})
	return ok
}

// yamlNumber reports whether YAML's parser would resolve a number of jsonTree's as
// jsonTree tags it; every other scalar is true.
func yamlNumber(n *yaml.Node) bool {
	switch n.Tag {
	case "!!int":
		if strings.HasPrefix(n.Value, "-0") {
			return false // a float to YAML
		}
		if _, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return true
		}
		_, err := strconv.ParseUint(n.Value, 10, 64)
		return err == nil
	case "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		return err == nil && !math.IsInf(f, 0)
	}
	return true
}
