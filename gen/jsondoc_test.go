package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"
)

// jsonDocSpec is a JSON spec with values of every JSON kind where kin-openapi keeps them
// as Go values (extensions, examples, defaults, enums): integers, floats in each
// notation, escapes, non-ASCII text, nulls, nested objects and arrays, and local $refs.
const jsonDocSpec = `{
  "openapi": "3.0.3",
  "info": {"title": "t \u00e9 \/ \"q\" \t", "version": "1", "x-n": [0, -1, 1.5, 1e5, 1E+5, -2.5e-3, 9223372036854775807, 18446744073709551615, 5e-400]},
  "x-ext": {"a": null, "b": true, "c": [{"d": "é€😀"}, []], "e": {}},
  "paths": {
    "/p/{id}": {
      "parameters": [{"$ref": "#/components/parameters/Id"}],
      "post": {
        "operationId": "create",
        "x-order": 3,
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}, "example": {"n": 1, "f": 0.25, "s": "x"}}}},
        "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}
      }
    }
  },
  "components": {
    "parameters": {"Id": {"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 1, "maximum": 1e3, "default": 7}}},
    "schemas": {
      "Thing": {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "enum": [1, 2, 3], "x-go-name": "N"},
        "f": {"type": "number", "multipleOf": 0.5, "default": 1.0},
        "s": {"type": "string", "pattern": "^[a-z\\\\]+$", "enum": ["a", "b\n", null], "nullable": true},
        "next": {"$ref": "#/components/schemas/Thing"},
        "any": {}
      }}
    }
  }
}
`

// TestJSONDocAsLoader: a JSON spec decoded from the source's tree (decodeJSONDoc) is
// the document kin-openapi's loader returns for the same text, to every Go value and
// type (an integer stays an int, as the loader's YAML parser resolves it).
func TestJSONDocAsLoader(t *testing.T) {
	texts := map[string][]byte{"jsonDocSpec": []byte(jsonDocSpec)}
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = data
	}
	decoded := 0
	for name, data := range texts {
		src, err := parseSource(name, data)
		if err != nil || !src.json || !viaSourceTree(data) {
			continue // not a JSON document idemgen decodes itself
		}
		want, wantErr := openapi3.NewLoader().LoadFromData(data)
		got, err := src.decodeJSONDoc(name, data)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: decodeJSONDoc error %v, the loader's %v", name, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		decoded++
		if !reflect.DeepEqual(got, want) {
			g, _ := got.MarshalJSON()
			w, _ := want.MarshalJSON()
			t.Errorf("%s: the document decoded from the source's tree is not the loader's:\n%s\nwant\n%s", name, g, w)
		}
	}
	if decoded < 2 {
		t.Errorf("%d documents decoded from the source's tree, want jsonDocSpec and testdata's", decoded)
	}
}

// TestJSONDocFallsBack: the texts that kin-openapi's loader does not read with its YAML
// parser, or reads into other values than jsonTree's tree holds, go to the loader.
func TestJSONDocFallsBack(t *testing.T) {
	for name, text := range map[string]string{
		"surrogate pair":     `{"a": "\ud83d\ude00"}`,
		"low surrogate":      `{"a": "\uDC00"}`,
		"U+0085":             "{\"a\": \"\u0085\"}",
		"not UTF-8":          "{\"a\": \"\xff\"}",
		"U+FFFE":             "{\"a\": \"\ufffe\"}",
		"external $ref":      `{"a": {"$ref" : "other.json#/x"}}`,
		"external $ref bare": `{"a": {"$ref":"./other.json"}}`,
	} {
		if viaSourceTree([]byte(text)) {
			t.Errorf("%s: viaSourceTree(%q) = true, want the loader", name, text)
		}
	}
	for _, text := range []string{`{"a": "$ref", "b": {"$ref": "#/a"}}`, `{"a": "x\\u00e9"}`, `{"a": "\u2028"}`} {
		if !viaSourceTree([]byte(text)) {
			t.Errorf("viaSourceTree(%q) = false, want the source's tree", text)
		}
	}
	for _, number := range []string{"-0", "-0.0e0", "1e400", "-1e400", "18446744073709551616", "123456789012345678901234567890"} {
		text := `{"a": [1, ` + number + `]}`
		root, err := jsonTree("t.json", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if number != "-0.0e0" && treeReadsAsYAML(root) {
			t.Errorf("%s: treeReadsAsYAML = true, want the loader", number)
		}
		if number == "-0.0e0" && !treeReadsAsYAML(root) {
			t.Errorf("%s: treeReadsAsYAML = false, YAML reads it as the float jsonTree tags", number)
		}
	}
}

// FuzzJSONTree checks viaSourceTree and treeReadsAsYAML against kin-openapi's YAML
// parser: for every JSON text that jsonTree reads and both accept, the parser reads the
// text too, into the same tree (kinds, tags, values, in order), so that the loader would
// decode the same document from it.
//
//	go test ./gen -run '^$' -fuzz FuzzJSONTree -fuzztime 30s
func FuzzJSONTree(f *testing.F) {
	for _, s := range []string{
		jsonDocSpec, `{}`, `{"a":1,"b":[1,2],"c":{"d":"e"},"f":true,"g":null}`, "{\"a\"\n: 1}", "{\"a\":\t1,\t\"b\" :2}",
		`{"a": "\ud83d\ude00"}`, "{\"a\": \"\u0085\"}", "{\"a\": \"\x7f\u0080\u009f\u2028\"}", `{"a": "\/\b\f\n\r\t\u0000\u001f"}`,
		`{"a": [-0, 0, -1, 1.0, 1e5, 1E-5, 1e400, 5e-400, 9223372036854775808, 18446744073709551616]}`,
		`{"` + strings.Repeat("k", 1100) + `": "` + strings.Repeat("v", 1100) + `"}`, `{"a": {"a": {"a": [[[]]]}}}`, `{"a": 1, "a": 2}`,
		`{"$ref": "#/x"}`, `{"": ""}`, "{\"a\": \"\ufeff\"}", " \r\n{\"a\": 1}\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		data := []byte(text)
		if !jsonText(data) || !viaSourceTree(data) {
			return
		}
		mine, err := jsonTree("f.json", data)
		if err != nil || !treeReadsAsYAML(mine) {
			return
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("jsonTree reads %q, kin-openapi's YAML parser refuses it: %v", text, err)
		}
		if len(doc.Content) != 1 {
			t.Fatalf("%q: the YAML parser reads %d documents", text, len(doc.Content))
		}
		if path, diff := sameTree(doc.Content[0], mine, "$"); diff != "" {
			t.Fatalf("%q at %s: %s", text, path, diff)
		}
	})
}

// sameTree compares the YAML parser's tree a with jsonTree's b: kinds, tags, values and
// children; it returns where they differ and how.
func sameTree(a, b *yaml.Node, at string) (string, string) {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value || len(a.Content) != len(b.Content) {
		return at, "YAML " + nodeString(a) + ", jsonTree " + nodeString(b)
	}
	for i := range a.Content {
		if p, d := sameTree(a.Content[i], b.Content[i], at+"/"+b.Content[i].Value); d != "" {
			return p, d
		}
	}
	return "", ""
}

func nodeString(n *yaml.Node) string {
	return fmt.Sprintf("%s %q (%d children)", n.Tag, n.Value, len(n.Content))
}
