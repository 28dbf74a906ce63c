package marker

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// schemaFile is the markers' JSON Schema, for editors and linters (and the Spectral
// ruleset beside it).
const schemaFile = "../../../schemas/x-idempotent.schema.json"

// TestJSONSchemaIsTheGrammar checks schemas/x-idempotent.schema.json against the reader of
// this package: the same fields (markerFields, and methods in the defaults), and the same
// verdict, valid or not, on each marker of a table of values, for the marker of an
// operation and for the document's defaults. The checks the schema cannot make (a duration
// of at least 1ms, retention at least the lease, a key or fingerprint header the operation
// declares) are the generator's alone and are left out of the table.
func TestJSONSchemaIsTheGrammar(t *testing.T) {
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]json.RawMessage) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	wantFields := slices.Sorted(slices.Values(markerFields))
	if got := keys(doc.Defs["markerObject"].Properties); !slices.Equal(got, wantFields) {
		t.Errorf("the schema's marker fields %v; the reader's %v", got, wantFields)
	}
	wantDefaults := slices.Sorted(slices.Values(append(slices.Clone(markerFields), "methods")))
	if got := keys(doc.Defs["defaults"].Properties); !slices.Equal(got, wantDefaults) {
		t.Errorf("the schema's defaults fields %v; the reader's %v", got, wantDefaults)
	}

	loaded, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("x-idempotent.schema.json", loaded); err != nil {
		t.Fatal(err)
	}
	marker, err := c.Compile("x-idempotent.schema.json#/$defs/marker")
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := c.Compile("x-idempotent.schema.json#/$defs/defaults")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{
		`true`, `false`, `{}`, `"yes"`, `1`, `[]`, `null`,
		`{header: Idempotency-Key}`, `{header: "Idempotency Key"}`, `{header: ""}`, `{header: 1}`,
		`{body: /idempotency_key}`, `{body: idempotency_key}`, `{body: /}`,
		`{header: Idempotency-Key, body: /key}`,
		`{required: true}`, `{required: "true"}`, `{required: yes}`,
		`{lease: 30s}`, `{lease: 1h30m}`, `{lease: 1.5s}`, `{lease: 30}`, `{lease: 30 seconds}`, `{lease: "-1s"}`, `{retention: 24h}`, `{timeout: 250ms}`, `{wait: 2s}`, `{wait: 2 s}`,
		`{isolation: serializable}`, `{isolation: Repeatable Read}`, `{isolation: "read  committed"}`, `{isolation: snapshot}`, `{isolation: READ UNCOMMITTED}`,
		`{store: postgres}`, `{store: PostgreSQL}`, `{store: redis}`, `{store: memcached}`,
		`{fingerprint-headers: [X-Tenant]}`, `{fingerprint-headers: X-Tenant}`, `{fingerprint-headers: ["X Tenant"]}`, `{fingerprint-headers: []}`,
		`{isolaton: serializable}`, `{Header: Idempotency-Key}`,
		`{methods: [post]}`, `{methods: [POST, put, Patch, delete]}`, `{methods: [get]}`, `{methods: post}`, `{methods: [connect]}`,
	} {
		for _, c := range []struct {
			name      string
			allowBool bool
			schema    *jsonschema.Schema
		}{{MarkerExt, true, marker}, {DefaultsExt, false, defaults}} {
			reader := readerAccepts(t, c.name, v, c.allowBool)
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(yamlToJSON(t, v)))
			if err != nil {
				t.Fatal(err)
			}
			schema := c.schema.Validate(inst) == nil
			if reader != schema {
				t.Errorf("%s: %s: the reader says valid=%v, the schema valid=%v", c.name, v, reader, schema)
			}
		}
	}
}

// readerAccepts reports whether this package's reader takes the marker value v (YAML)
// without an error: as x-idempotent (allowBool) or x-idempotent-defaults.
func readerAccepts(t *testing.T, name, v string, allowBool bool) bool {
	t.Helper()
	src, err := spec.ParseSource("marker.yaml", []byte("m: "+v+"\n"))
	if err != nil {
		t.Fatalf("%s: %v", v, err)
	}
	k, n := src.Lookup("m")
	var errs spec.ErrorList
	s := &Source{src}
	m, ok := s.parseMarker(k, n, name, allowBool, &errs)
	if allowBool && n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		return len(errs) == 0 // true or false: both valid (ok says marked)
	}
	return ok && !m.Failed && len(errs) == 0
}

func yamlToJSON(t *testing.T, v string) string {
	t.Helper()
	var x any
	if err := yaml.Unmarshal([]byte(v), &x); err != nil {
		t.Fatalf("%s: %v", v, err)
	}
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatalf("%s: %v", v, err)
	}
	return string(b)
}
