package idemgen

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// spectralHeader opens schemas/idemgen.spectral.yaml; the rules follow it as JSON (which
// is YAML), each with x-idempotent.schema.json's definitions inline: Spectral resolves no
// $ref to another file in a rule's schema (the rule then checks nothing).
const spectralHeader = `# A Spectral ruleset for idemgen's markers (https://docs.stoplight.io/docs/spectral):
# x-idempotent on each operation and x-idempotent-defaults at the root follow the grammar of
# x-idempotent.schema.json, the generator's own (gen/internal/marker's tests keep them
# equal). Use it beside your own rulesets:
#
#   npx @stoplight/spectral-cli lint -r schemas/idemgen.spectral.yaml openapi.yaml
#
# or extend it from yours (extends: [./path/to/idemgen.spectral.yaml]). CI runs it on the
# payments example's spec (passes) and on schemas/testdata/marker-mistakes.yaml (fails).
#
# Generated from x-idempotent.schema.json by TestSpectralRulesetCarriesTheSchema
# (go test -run TestSpectralRulesetCarriesTheSchema -update .): edit the schema, not this.
`

// TestSpectralRulesetCarriesTheSchema checks that schemas/idemgen.spectral.yaml carries
// schemas/x-idempotent.schema.json's definitions as they are (-update rewrites it).
func TestSpectralRulesetCarriesTheSchema(t *testing.T) {
	raw, err := os.ReadFile("schemas/x-idempotent.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("x-idempotent.schema.json: %v", err)
	}
	only := func(def string) map[string]any {
		return map[string]any{"$defs": schema.Defs, "$ref": "#/$defs/" + def}
	}
	rule := func(ext, given, def string) map[string]any {
		return map[string]any{
			"description": ext + " follows idemgen's marker grammar (schemas/x-idempotent.schema.json).",
			"message":     ext + ": {{error}}",
			"severity":    "error",
			"given":       given,
			"then": map[string]any{"function": "schema", "functionOptions": map[string]any{
				"dialect": "draft2020-12", "schema": only(def)}},
		}
	}
	ruleset := map[string]any{"rules": map[string]any{
		"idemgen-marker":   rule("x-idempotent", "$.paths[*][get,put,post,delete,options,head,patch,trace].x-idempotent", "marker"),
		"idemgen-defaults": rule("x-idempotent-defaults", "$.x-idempotent-defaults", "defaults"),
	}}
	var b bytes.Buffer
	b.WriteString(spectralHeader)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ruleset); err != nil {
		t.Fatal(err)
	}
	const path = "schemas/idemgen.spectral.yaml"
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("%s is stale (or unreadable: %v): go test -run TestSpectralRulesetCarriesTheSchema -update .", path, err)
	}
}
