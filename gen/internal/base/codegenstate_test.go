package base

import (
	"fmt"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// TestInitCodegenSetsTheNameState: initCodegen's shortcut (Generate stopped before its
// templates) leaves oapi-codegen naming types exactly as a full run on an empty document
// does, for each configuration idemgen uses and both OpenAPI versions, after a run whose
// state differs in everything the names read (another version, a name normaliser with
// initialisms, a type mapping, a client type name). The probes distinguish that other
// state from each target's, so a shortcut that left any of it behind fails.
func TestInitCodegenSetsTheNameState(t *testing.T) {
	codegenMu.Lock()
	defer codegenMu.Unlock()
	configs := map[string]codegen.Configuration{
		"server":        baseConfig("api", RouterStdHTTP, false, false),
		"server+client": baseConfig("api", RouterChi, true, false),
		"client only":   baseConfig("api", RouterStdHTTP, true, true),
	}
	for name, cfg := range configs {
		for _, version := range []string{"3.0.3", "3.1.0"} {
			t.Run(fmt.Sprintf("%s/%s", name, version), func(t *testing.T) {
				doc := &openapi3.T{OpenAPI: version}
				other := otherCodegenState(t, version)
				poisoned := nameProbes(t)
				if err := fullInitCodegen(cfg, doc); err != nil {
					t.Fatal(err)
				}
				want := nameProbes(t)
				if want == poisoned {
					t.Fatalf("the probes do not tell the other state from this one:\n%s", want)
				}
				if err := generateEmpty(other, &openapi3.T{OpenAPI: otherVersion(version)}); err != nil {
					t.Fatal(err)
				}
				err := generateEmpty(stopEarly(cfg), doc)
				if err == nil || !strings.Contains(err.Error(), stopPattern) {
					t.Fatalf("Generate with the stop pattern: %v; want its pattern's error (initCodegen would fall back to a full run: does OapiCodegenVersion still match go.mod?)", err)
				}
				if got := nameProbes(t); got != want {
					t.Errorf("after the shortcut oapi-codegen names:\n%s\nafter a full run:\n%s", got, want)
				}
			})
		}
	}
}

// otherCodegenState runs oapi-codegen to the end with a configuration unlike any of
// idemgen's, on the other OpenAPI version, and returns it.
func otherCodegenState(t *testing.T, version string) codegen.Configuration {
	t.Helper()
	cfg := baseConfig("other", RouterEcho, true, false)
	cfg.OutputOptions.NameNormalizer = string(codegen.NameNormalizerFunctionToCamelCaseWithInitialisms)
	cfg.OutputOptions.AdditionalInitialisms = []string{"PET"}
	cfg.OutputOptions.TypeMapping = &codegen.TypeMapping{Integer: codegen.FormatMapping{Default: codegen.SimpleTypeSpec{Type: "int64"}}}
	cfg.OutputOptions.ClientTypeName = "OtherClient"
	if err := generateEmpty(cfg, &openapi3.T{OpenAPI: otherVersion(version)}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func otherVersion(v string) string {
	if v == "3.1.0" {
		return "3.0.3"
	}
	return "3.1.0"
}

// nameProbes is what oapi-codegen's exported type functions give for names and schemas
// whose Go form depends on its package state: the name normaliser and its initialisms,
// the type mapping, 3.1's null type (an error under 3.0).
func nameProbes(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, n := range []string{"pet_id", "api-url", "pet"} {
		fmt.Fprintf(&b, "%s → %s\n", n, codegen.SchemaNameToTypeName(n))
	}
	schemas := map[string]*openapi3.Schema{
		"integer":                        openapi3.NewIntegerSchema(),
		"object with a nullable integer": openapi3.NewObjectSchema().WithProperty("n", &openapi3.Schema{Type: &openapi3.Types{"integer", "null"}}),
	}
	for _, name := range []string{"integer", "object with a nullable integer"} {
		s, err := codegen.GenerateGoSchema(openapi3.NewSchemaRef("", schemas[name]), []string{"Probe"})
		if err != nil { // 3.0 has no type arrays
			fmt.Fprintf(&b, "%s → %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "%s → %s\n", name, s.TypeDecl())
	}
	return b.String()
}

// TestShortcutOnlyAfterIdemgensOwnRun: the shortcut is taken after idemgen's own run to
// the end, and not after oapi-codegen run by other code, nor after a stopped run.
func TestShortcutOnlyAfterIdemgensOwnRun(t *testing.T) {
	codegenMu.Lock()
	defer codegenMu.Unlock()
	cfg := baseConfig("api", RouterStdHTTP, false, false)
	doc := &openapi3.T{OpenAPI: "3.0.3"}
	if err := fullInitCodegen(cfg, doc); err != nil {
		t.Fatal(err)
	}
	if !stateIsIdemgens() {
		t.Error("after idemgen's own run to the end: no shortcut")
	}
	otherCodegenState(t, "3.0.3")
	if stateIsIdemgens() {
		t.Error("after oapi-codegen run by other code: the shortcut, which would keep that run's resolved names")
	}
	if err := fullInitCodegen(cfg, doc); err != nil {
		t.Fatal(err)
	}
	if err := generateEmpty(stopEarly(cfg), doc); err == nil {
		t.Fatal("the stopped run did not stop")
	}
	if stateIsIdemgens() {
		t.Error("after a stopped run: the shortcut")
	}
}
