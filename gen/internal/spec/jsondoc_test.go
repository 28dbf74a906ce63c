package spec

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
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "*", "*", "*.json")) // gen/testdata: the golden and error specs
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = data
	}
	decoded := 0
	for name, data := range texts {
		var node yaml.Node
		if yaml.Unmarshal(data, &node) != nil || strings.Contains(string(data), "\u0085") {
			continue // the loader reads it with encoding/json: TestJSONDocEscapes
		}
		src, err := ParseSource(name, data)
		if err != nil || !src.JSON || externalRefText(data) {
			continue // not a JSON document idemgen decodes itself
		}
		decoded++
		sameDoc(t, name, src, data, data)
	}
	if decoded < 2 {
		t.Errorf("%d documents decoded from the source's tree, want jsonDocSpec and testdata's", decoded)
	}
}

// TestJSONDocEscapes: a JSON spec the loader would read with encoding/json (its YAML
// parser refuses surrogate pair escapes and folds a raw U+0085) decodes from the
// source's tree as the loader reads the same document written without the escapes: the
// same strings, numbers typed as YAML types them.
func TestJSONDocEscapes(t *testing.T) {
	escaped := strings.Replace(jsonDocSpec, `"t \u00e9`, `"t \ud83d\ude00 \uD83C\uDF89 \u00e9`, 1)
	plain := strings.Replace(jsonDocSpec, `"t \u00e9`, "\"t \U0001F600 \U0001F389 \u00e9", 1)
	if escaped == jsonDocSpec || plain == jsonDocSpec {
		t.Fatal("jsonDocSpec has no title to put the escapes in")
	}
	var node yaml.Node
	if yaml.Unmarshal([]byte(escaped), &node) == nil {
		t.Fatal("the YAML parser reads surrogate pair escapes now: the loader no longer needs encoding/json for them")
	}
	src, err := ParseSource("escaped.json", []byte(escaped))
	if err != nil {
		t.Fatal(err)
	}
	sameDoc(t, "surrogate escapes", src, []byte(escaped), []byte(plain))

	// A raw U+0085 in a string: kept, as encoding/json keeps it (YAML would fold it).
	nel := "{\"openapi\": \"3.0.3\", \"info\": {\"title\": \"a\u0085b\", \"version\": \"1\"}, \"paths\": {}}"
	src, err = ParseSource("nel.json", []byte(nel))
	if err != nil {
		t.Fatal(err)
	}
	sameDoc(t, "U+0085", src, []byte(nel), []byte(nel))
}

// sameDoc checks that decodeJSONDoc of data (src its tree) is the document the loader
// reads from want.
func sameDoc(t *testing.T, name string, src *Source, data, want []byte) {
	t.Helper()
	wantDoc, wantErr := openapi3.NewLoader().LoadFromData(want)
	got, err := src.decodeJSONDoc(name, data)
	if err != nil || wantErr != nil {
		t.Errorf("%s: decodeJSONDoc error %v, the loader's %v", name, err, wantErr)
		return
	}
	if !reflect.DeepEqual(got, wantDoc) {
		g, _ := got.MarshalJSON()
		w, _ := wantDoc.MarshalJSON()
		t.Errorf("%s: the document decoded from the source's tree is not the loader's:\n%s\nwant\n%s", name, g, w)
	}
}

// TestJSONDocFallsBack: the texts with a $ref to another file go to the loader before
// the tree is built, and the numbers YAML resolves otherwise than jsonTree tags them
// send the document to the loader too.
func TestJSONDocFallsBack(t *testing.T) {
	for _, text := range []string{`{"a": {"$ref" : "other.json#/x"}}`, `{"a": {"$ref":"./other.json"}}`} {
		if !externalRefText([]byte(text)) {
			t.Errorf("externalRefText(%q) = false, want true", text)
		}
	}
	for _, text := range []string{`{"a": "$ref", "b": {"$ref": "#/a"}}`, `{"description": "\"$ref\": x"}`, `{}`} {
		if externalRefText([]byte(text)) {
			t.Errorf("externalRefText(%q) = true, want false", text)
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

// FuzzJSONTree checks jsonTree and treeReadsAsYAML against kin-openapi's YAML parser:
// for every JSON text that jsonTree reads, the YAML parser reads too (and, as the loader
// does, without a raw U+0085), and treeReadsAsYAML accepts, the parser's tree is
// jsonTree's (kinds, tags, values, in order), so that the loader would decode the same
// document from it.
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
		if !jsonText(data) || strings.Contains(text, "\u0085") {
			return
		}
		mine, err := jsonTree("f.json", data)
		if err != nil || !treeReadsAsYAML(mine) {
			return
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return // the loader reads it with encoding/json: TestJSONDocEscapes
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
