package gen

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

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
// keys), then resolves the $refs with ResolveRefsIn. load calls it for a text that
// viaSourceTree accepts; the tree is then the one the loader's parser would build, but
// for a number YAML resolves otherwise (treeReadsAsYAML). For such a number, a $ref to
// another file (resolved against the document's location), or when decoding or
// resolving fails (for the loader's own error), the loader reads the data itself.
func (s *source) decodeJSONDoc(path string, data []byte) (*openapi3.T, error) {
	if !treeReadsAsYAML(s.root) || s.externalRefs() {
		return loadDoc(path, data)
	}
	doc := &openapi3.T{}
	if err := s.root.Decode(doc); err != nil {
		return loadDoc(path, data)
	}
	if err := newLoader().ResolveRefsIn(doc, nil); err != nil {
		return loadDoc(path, data)
	}
	return doc, nil
}

// viaSourceTree reports whether load decodes the JSON text data from the source's tree
// (decodeJSONDoc) rather than with kin-openapi's loader: whether the loader's YAML parser
// accepts the text, reading it as jsonTree does, and the text has no $ref to another
// file. When the parser refuses the text (a UTF-16 surrogate escaped, a byte that
// is not UTF-8, U+FFFE) the loader decodes with encoding/json instead, and it does so too
// for a raw U+0085 (a line break to YAML). Any control character but tab and line ends
// answers false too (JSON has none outside strings, and none raw inside them). The
// checks err on the side of false: the loader is always right, only slower.
func viaSourceTree(data []byte) bool {
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20 && c != '\t' && c != '\n' && c != '\r':
				return false
			case c == '\\' && i+3 < len(data) && data[i+1] == 'u' && (data[i+2] == 'd' || data[i+2] == 'D') && strings.IndexByte("89abcdefABCDEF", data[i+3]) >= 0:
				return false // \uD800-\uDFFF: half a surrogate pair (or an escaped backslash before "ud8")
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 || r == 0x85 || r == 0xfffe || r == 0xffff {
			return false
		}
		i += n
	}
	return !externalRefText(data)
}

// externalRefText reports whether the JSON text data may hold a $ref to another file: a
// "$ref" key whose value does not start with "#".
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

// jsonText reports whether data is read as JSON (parseSource): its first byte past
// whitespace opens an object.
func jsonText(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
