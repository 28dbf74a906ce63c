package gen_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

// failureModes are oapi-codegen v2.8.2's failure modes on valid specs, found in its source
// (pkg/codegen): every place it returns an error, panics, or writes Go that does not
// compile for a schema or an operation a valid spec may hold (docs/real-specs.md lists
// them with the ones a spec cannot reach: configuration, templates, server URLs, ...).
// Each has a small spec of idemgen's own: a golden case, compiled by TestCompile, which
// generates with the located warnings listed (none where idemgen only renames or moves
// what oapi-codegen mishandles, with nothing lost), or, where idemgen cannot simplify, an
// errors spec that gives the located errors listed, all at once.
var failureModes = []struct {
	where string // in pkg/codegen
	says  string // oapi-codegen's message, or the compiler's on its output
	class string
	// golden is the golden case, or errors the spec of testdata/errors; want are texts
	// that the case's warnings (or errors) hold, each in a located one.
	golden, errors string
	want           []string
}{
	// Schemas it cannot type: typed loosely (json.RawMessage; string for a parameter).
	{"schema.go:1359 oapiSchemaToGoType", "unhandled Schema type: &[number string]", "3.1 type array of two non-null types", "degraded", "", []string{"components.schemas.Thing.properties.amount: oapi-codegen cannot type this schema (unhandled Schema type"}},
	{"schema.go:1359 (through operations.go:262, 1851, 1967, 2011; codegen.go:1153, 1223, 1280)", "error generating Go type for schema in parameter P: ...", "the same in an operation's parameters, body, responses, headers; in components/parameters, requestBodies, responses", "degradedops", "", []string{"paths./a/{id}.parameters.0.schema: oapi-codegen cannot type this schema", "idemgen types it as string", "components.requestBodies.B.content.application/json.schema.properties.m"}},
	{"merge_schemas.go:296", "can not merge incompatible types: [object], [object null]", "allOf members of two types", "allofmerge", "", []string{"components.schemas.Transfer.properties.account: oapi-codegen cannot type this schema (can not merge incompatible types"}},
	{"merge_schemas.go:301", "can not merge incompatible formats", "allOf of a $ref with a format and a member without", "allofmerge", "", []string{"properties.id: oapi-codegen cannot type this schema (can not merge incompatible formats)"}},
	{"merge_schemas.go:409", "merging two schemas with additional properties, this is unhandled", "allOf members both with additionalProperties", "allofmerge", "", []string{"properties.labels: oapi-codegen cannot type this schema (merging two schemas with additional properties"}},
	{"merge_schemas.go:425, 431", "merging two schemas with discriminators is not supported", "allOf members both with a discriminator", "allofmerge", "", []string{"properties.owner: oapi-codegen cannot type this schema (merging two schemas with discriminators"}},
	{"merge_schemas.go:274, 284", "error transitive merging AllOf on schema 1", "a nested allOf oapi-codegen cannot merge (its cause lost)", "allofmerge", "", []string{"properties.code: oapi-codegen cannot type this schema (error transitive merging AllOf on schema 1)"}},
	{"merge_schemas.go:311, 325, 331, 337, 379, 385, 391", "merging two sets of defaults is undefined; ... different ReadOnly", "allOf members that disagree on keywords that do not shape the Go type", "names", "", nil},
	{"schema.go:1551 via union.tmpl (generateUnion)", "method Payment.AsCard already declared", "a oneOf listing one $ref twice", "unionlists", "", []string{"components.schemas.Payment: the union lists #/components/schemas/Card more than once"}},
	{"schema.go:1359 in a union's member", "unhandled Schema type (the whole union refused)", "an inline union member it cannot type", "unionlists", "", []string{"components.schemas.Amount.anyOf.1: oapi-codegen cannot type this schema"}},
	// Enums.
	{"codegen.go:1550 GenerateEnums", `enum value "<nil>" of ThingLevel is not a number or boolean literal`, "null in an integer enum", "degraded", "", []string{"components.schemas.Thing.properties.level: oapi-codegen cannot declare null"}},
	{"codegen.go:1550 GenerateEnums", `enum value "two" of LevelCount is not a number or boolean literal`, "a string in an integer enum", "enumvalues", "", []string{`properties.count: oapi-codegen cannot declare the enum value(s) "two"`}},
	{"constants.tmpl", "cannot use 2.5 (untyped float constant) as LevelStep value in constant declaration (truncated); 3e+09 overflows int32; true in a number enum", "enum values a constant of the Go type cannot hold", "enumvalues", "", []string{`properties.step: oapi-codegen cannot declare the enum value(s) "2.5"`, `properties.code: oapi-codegen cannot declare the enum value(s) "3e+09"`, `properties.ratio: oapi-codegen cannot declare the enum value(s) "true"`}},
	{"constants.tmpl (Valid)", "duplicate case LevelModeQuick in expression switch", "a value listed twice beside x-enum-varnames", "enumvalues", "", []string{"properties.mode: the enum lists a value twice"}},
	{"validate_spec.go:122 checkNoControl", `enum value in property "label" ... may not contain a newline`, "a string enum value with a control character", "enumvalues", "", []string{`properties.label: oapi-codegen cannot declare the enum value(s) "line1\nline2"`}},
	{"typemapping (constants.tmpl)", "cannot use \"2023-09-01\" (untyped string constant) as openapi_types.Date value", "an enum of format: date strings", "dateenum", "", []string{"oapi-codegen cannot declare the enum's values as constants of openapi_types.Date"}},
	// Unions and discriminators.
	{"schema.go:1677 generateUnion", "discriminator: not all schemas were mapped", "a discriminator whose members map to one name (inline members)", "unionlists", "", []string{"components.schemas.Channel: oapi-codegen cannot map the discriminator"}},
	{"schema.go:1650 generateUnion", "ambiguous discriminator.mapping: please replace inlined object with $ref", "a mapping beside inline members", "unionlists", "", []string{"components.schemas.Method: oapi-codegen cannot map the discriminator"}},
	{"request-bodies.tmpl (its issue 2498)", "type CreatePaymentJSONRequestBody CreatePaymentJSONBody: no MarshalJSON/UnmarshalJSON (the body decodes empty)", "an inline oneOf/anyOf request body", "unionbody", "", nil},
	// References.
	{"utils.go:473, 476 RefPathToGoType", "unexpected reference depth: 6 for ref: #/paths/~1things~1%7Bid%7D/get/parameters/1", "a $ref into another operation's parameters", "deepref", "", nil},
	{"utils.go:473, 476 RefPathToGoType", "unexpected reference depth: 6 for ref: #/components/schemas/Order/properties/status", "a schema $ref into another schema or an operation's body", "deepschemaref", "", nil},
	{"utils.go:451, 457 RefPathToGoType", "unrecognized external reference 'orders.yaml'; please provide the known import", "$refs to other files", "multifile", "", nil},
	{"utils.go:497 RefPathToGoType", "error finding ref: #/components/schemas/Missing in spec", "a dangling $ref (an invalid spec: an error before anything else)", "", "dangling-ref.yaml", []string{`$ref "#/components/schemas/Missing" does not resolve`, `$ref "#/components/schemas/Gone" does not resolve`}},
	// Names.
	{"codegen.go:1357 GenerateTypes", "duplicate typename 'FooBar0' detected, can't auto-rename", "two inline union members named alike", "unionmembers", "", nil},
	{"codegen.go:1357 GenerateTypes", "duplicate typename 'Pet' detected", "components, operation types and server names sharing a Go name", "collisions", "", nil},
	{"strict-responses.tmpl", "undefined: MadeJSONResponseBodyState", "inline types of a components/responses entry", "responsetypes", "", nil},
	{"strict-interface.tmpl, operations.go:916", "undefined: CreateOrder201HALJSONResponseBodyStatus", "inline enums of a +json response", "otherjson", "", nil},
	{"constants.tmpl, typedef.tmpl", "ColorRed redeclared in this block", "enum constants named like a type, a server function or another enum's constant", "enumconsts", "", nil},
	{"typedef.tmpl", "IsGlobal redeclared", "properties one Go field name apart (isGlobal, is_global)", "fieldnames", "", nil},
	{"typedef.tmpl, additional-properties.tmpl", "field and method with the same name Get; AdditionalProperties redeclared", "a property named like a member of its type", "gonames", "", nil},
	{"std-http-*.tmpl, client.tmpl (GoVariableName)", "w redeclared in this block; err redeclared; string (local variable) is not a type", "path parameters named like the generated functions' own variables, packages, predeclared names, or one another", "gonames", "", nil},
	{"SchemaNameToTypeName", `x-go-name in property "東京" must be a valid Go identifier: "2"; an empty field name`, "names of no Latin letter", "gonames", "", nil},
	{"typedef.tmpl", "400_Details_Item is not a Go identifier", "schemas and responses named by status codes", "statuscodes", "", nil},
	{"strict-interface.tmpl", "interface{} response type with a Visit method", "a JSON response without a schema", "names", "", nil},
	// Bodies.
	{"strict-interface.tmpl:15", "Body redeclared", "a body in several binary media types", "binarybodies", "", nil},
	{"strict-http.tmpl:116", "cannot convert data (variable of type []byte) to type MakeATextRequestBody", "a text/plain request body whose schema is no string", "textbody", "", []string{"paths./a.post.requestBody.content.text/plain.schema: oapi-codegen's strict server converts a text/plain body's bytes"}},
	// Extensions in shapes it cannot use.
	{"extension.go:41 via schema.go:762, 776, 810, 900, 1078, 1195; utils.go:1023-1077, 1153-1169", `invalid value for "x-go-type": failed to convert type: map[string]interface {}`, "oapi-codegen's extensions in another tool's shape (go-swagger's x-go-type object)", "extensions", "", []string{"components.schemas.Money.x-go-type: oapi-codegen cannot use this x-go-type: an object", "components.responses.Declined.x-go-name: oapi-codegen cannot use this x-go-name: a number"}},
	{"validate_spec.go:150 checkIdentifier", `x-go-name in parameter "payment_id" ... must be a valid Go identifier: "payment id"`, "an x-go-name or x-go-type-name that is no Go identifier", "extensions", "", []string{`parameters.0.x-go-name: oapi-codegen cannot use this x-go-name: "payment id" is not a Go identifier`}},
	{"validate_spec.go:163 checkGoType", `x-go-type ... must be a Go type expression`, "an x-go-type that is no Go type", "extensions", "", []string{`properties.kind.x-go-type: oapi-codegen cannot use this x-go-type: "not a type!"`}},
	{"validate_spec.go:193 checkTagKey", `x-oapi-codegen-extra-tags key ... may not contain a space`, "a struct tag key Go does not take", "extensions", "", []string{"properties.label.x-oapi-codegen-extra-tags: oapi-codegen cannot use this"}},
	// Names it refuses to copy into Go.
	{"validate_spec.go:107 checkText", `property name ... may not contain a double quote: "font\"family"`, "a property name with a quote or a backtick", "textnames", "", []string{`components.schemas.Style: oapi-codegen cannot write the property name "back` + "`" + `tick"`}},
	{"validate_spec.go:107 checkText", `format in property "id" ... may not contain a double quote`, "a format with a quote", "textnames", "", []string{`components.schemas.Saved.properties.id: oapi-codegen cannot write the format "uuid\"v4"`}},
	{"validate_spec.go:138 checkDiscriminatorValue", `discriminator mapping key ... may not contain a backslash`, "a discriminator mapping key with a backslash", "textnames", "", []string{"components.schemas.Shape: oapi-codegen cannot write the discriminator's property name or a mapping key"}},
	{"validate_spec.go:107 checkText", `parameter name in POST path "/notes" may not contain a double quote; OpenAPI path may not contain a backtick`, "a path or a parameter name with a quote, a backtick or a control character (no simplification: the server routes and binds by them)", "", "unwritable.yaml", []string{"/notes/`raw`", `the parameter name "x\"y"`, `the parameter name "a\tb"`}},
	{"validate_spec.go:107 checkSecurity", `security scope for "oauth" in POST path "/a" may not contain a double quote`, "a security scope with a quote (no simplification: the server hands scopes to its authentication as written)", "", "codegen-refuses.yaml", []string{"in the root security requirements", `in POST path "/a"`, `in POST path "/b"`}},
	{"stdhttp/std-http-handler.tmpl (at run time)", `pattern "GET /attachments/{name}" conflicts with pattern "GET /attachments/{id}" (a panic of net/http's ServeMux)`, "paths one template apart serving one method (an invalid spec real ones have)", "equivalentpaths", "", []string{"paths./attachments/{name}.get: GET /attachments/{name} is GET /attachments/{id} with other parameter names"}},
	{"stdhttp/std-http-handler.tmpl (at run time)", "the same, for a marked operation", "a marked operation so placed (not left out)", "", "equivalent-paths.yaml", []string{"POST /things/{name} is POST /things/{id} with other parameter names"}},
	// What a valid spec does not have: invalid specs, errors before anything else.
	{"utils.go:720, 727 SortParamsByPath", "path '/things/{thing_id}' has 1 positional parameters, but spec has 0 declared", "a template parameter nothing declares, a path parameter the template does not have", "", "path-template.yaml", []string{`does not declare the template parameter "thing_id"`, `parameter "site_id" (in: path) of POST /invoices/{invoice_id}/pay is not in the path template`}},
	{"operations.go:2552, 2563 CombineOperationParameters", "duplicate local parameter query/q", "a parameter declared twice in one list", "", "parameters.yaml", []string{`parameter "tenant" (in: header) of path /orders is declared twice`, `parameter "page" (in: query) of POST /orders is declared twice`}},
	{"schema.go:1526 paramToGoType", "parameter 'q' has no schema or content", "a parameter with neither a schema nor a content map", "", "parameters.yaml", []string{`parameter "q" (in: query) has neither a schema nor a content map`, `parameter "orphan" (in: query) has neither`}},
	{"operations.go:160, 175 Style, Explode (panic)", "unknown parameter format", "a parameter in: body (Swagger 2.0's)", "", "parameters.yaml", []string{"in: body is not a parameter location"}},
	{"validate_spec.go:179 checkResponseKey", `response key in POST path "/orders" must be a three-digit status code, a range such as 2XX, or default: "2xx"`, "a response key that is no status code, range or default", "", "parameters.yaml", []string{`response "2xx" of POST /orders`, `response "200 OK" of POST /orders`}},
	{"operations.go:1396 via CheckOperationIDs", "two operations share one Go name", "an operationId two operations declare", "", "duplicate-operationid.yaml", []string{`operationId "makeA" of POST /b is also the operationId of POST /a`}},
}

// located matches a message that starts with FILE:LINE:COL.
var located = regexp.MustCompile(`^[^:]+:[0-9]+:[0-9]+: `)

// TestFailureModes runs each of oapi-codegen's failure modes: its golden case generates
// (TestCompile compiles it) with every warning located and the ones listed, or its errors
// spec gives located errors only, the ones listed among them.
func TestFailureModes(t *testing.T) {
	for _, m := range failureModes {
		name := m.golden
		if name == "" {
			name = m.errors
		}
		t.Run(name+"/"+m.class, func(t *testing.T) {
			if m.golden != "" && m.errors != "" || m.golden == "" && m.errors == "" {
				t.Fatalf("%s: want one golden case or one errors spec", m.where)
			}
			var got []string
			if m.golden != "" {
				if !slices.Contains(goldenCases, m.golden) {
					t.Fatalf("%s is not a golden case: TestCompile would not compile it", m.golden)
				}
				_, got = generateCase(t, goldenSpec(t, m.golden), false)
			} else {
				var err error
				err, got = generateCase(t, filepath.Join("testdata", "errors", m.errors), true)
				if len(gen.Errors(err)) != len(got) {
					t.Errorf("%v: not every error is located", err)
				}
				if len(m.want) > 1 && len(got) < 2 {
					t.Errorf("one error, want every one at once: %v", got)
				}
			}
			for _, g := range got {
				if !located.MatchString(g) {
					t.Errorf("not located: %s", g)
				}
			}
			for _, w := range m.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
					t.Errorf("no message holds %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// generateCase generates spec, and returns its error and its warnings, or (wantErr) its
// errors, one message each.
func generateCase(t *testing.T, spec string, wantErr bool) (error, []string) {
	t.Helper()
	var warnings []string
	_, err := gen.Generate(gen.Options{Spec: spec, Package: "x", Warnf: func(format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf(format, args...))
	}})
	switch {
	case wantErr && err == nil:
		t.Fatal("no error")
	case wantErr:
		return err, strings.Split(err.Error(), "\n")
	case err != nil:
		t.Fatal(err)
	}
	return nil, slices.DeleteFunc(warnings, func(w string) bool { return strings.Contains(w, "no operation is marked") })
}

// TestFailureModesClient generates every golden case of failureModes with the client
// (Options.Client: oapi-codegen's client and IdempotentClient, whose functions bind path
// parameters and bodies too) and builds them with go vet, as TestCompile does the server.
func TestFailureModesClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds generated packages with the go command")
	}
	dir, err := os.MkdirTemp("testdata", "_client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var pkgs []string
	seen := map[string]bool{}
	for _, m := range failureModes {
		if m.golden == "" || seen[m.golden] || goldenRouters[m.golden] != "" {
			continue
		}
		seen[m.golden] = true
		files, err := gen.Generate(gen.Options{Spec: goldenSpec(t, m.golden), Package: m.golden, Client: true})
		if err != nil {
			t.Fatalf("%s: %v", m.golden, err)
		}
		if err := gen.Write(filepath.Join(dir, m.golden), files); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(filepath.Join(dir, m.golden)))
	}
	out, err := exec.Command("go", append([]string{"vet"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go vet of the failure modes' golden cases with -client: %v\n%s", err, out)
	}
}
