package gen_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/util"

	"github.com/idemgen/idemgen/gen"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenCases are the directories of testdata/golden: each holds openapi.yaml and the
// files idemgen generates from it, in a package named like the directory. They are
// compiled by TestCompile, and the petstore one is run against PostgreSQL by
// gen/internal/e2e.
var goldenCases = []string{
	"truemarker",      // x-idempotent: true
	"fullobject",      // every marker field
	"defaults",        // x-idempotent-defaults at the root, overridden per operation
	"customheader",    // another header name: injected when undeclared, the declared one otherwise
	"bodykey",         // the key in a body field (JSON pointer), also nested
	"pathquery",       // path (path-item level too) and query parameters in the fingerprint
	"collisions",      // two schemas with one Go name, an enum constant named like a type
	"petstore",        // ../shared/specs/petstore-expanded.yaml with its POST (addPet) marked
	"bodies",          // no input, multipart, raw bytes, text, form, two content types
	"keyspec",         // keys the spec declares: x-idempotency-key uuid, maxLength/pattern, a required body key; own 409/422; fingerprint-headers
	"methods",         // x-idempotent-defaults.methods: every POST marked, one opted out, a stream left unmarked
	"names",           // valid specs oapi-codegen alone fails on: name collisions, a schema named "400", webhooks, ...
	"fieldnames",      // properties whose names are one Go field name (isGlobal, is_global)
	"otherjson",       // class 5: inline enums in application/hal+json (problem+json, ...) responses: declared under the name used
	"enumconsts",      // class 5: enum constants named like a type, a server function or another enum's constant
	"statuscodes",     // class 5: a schema and a response named "400" with inline array items (N400_Details_Item)
	"dateenum",        // class 5: enums of format: date strings
	"unicode",         // JSON with UTF-16 surrogate pair escapes (read by kin-openapi's loader: its YAML parser refuses them)
	"jsontree",        // JSON decoded from idemgen's own node tree (jsondoc.go): refs, numbers, escapes, enums, defaults
	"multifile",       // $refs to schemas and responses in other files
	"ecmapattern",     // issue 17 class 1: ECMA-262 key and body patterns (a negative lookahead)
	"bodykeys",        // class 2: the key a JSON or form body declares; a property that only suggests it
	"convention",      // class 3: the added header named as the spec's other operations name theirs
	"caseheader",      // class 4: one key header declared twice in different cases: the stricter wins
	"contentref",      // class 6: a bundler's content: {$ref: ...} to a content map, resolved
	"keyplaces",       // class 7: the key declared on a GET too, and as a header and a query parameter
	"chirouter",       // routers.yaml with -router chi (served by gen/internal/e2e, as are the five below)
	"echorouter",      // routers.yaml with -router echo
	"ginrouter",       // routers.yaml with -router gin
	"chiexternal",     // routers.yaml with -base=external beside oapi-codegen's own chi strict server
	"echoexternal",    // the same for echo
	"ginexternal",     // the same for gin
	"redisstore",      // store: redis beside PostgreSQL operations (idem/idemredis compiles it: not a dependency of this module)
	"redisonly",       // store: redis as the document default, every POST marked
	"unionbody",       // inline oneOf/anyOf request bodies (oapi-codegen issue 2498): moved into components, their JSON kept
	"unionmembers",    // inline union members oapi-codegen names alike (Foo.bar's and FooBar's FooBar0): moved into components
	"unionlists",      // a oneOf listing one $ref twice (methods declared twice), an inline member oapi-codegen cannot type
	"degraded",        // schemas oapi-codegen cannot type: a 3.1 multi-type scalar (json.RawMessage, warned), null in an integer enum
	"degradedops",     // the same outside components/schemas: parameters (string), bodies, responses, headers
	"allofmerge",      // allOf members oapi-codegen cannot merge (two types, formats, additionalProperties, discriminators; nested)
	"deepref",         // a $ref into another operation's parameters (#/paths/.../parameters/1): inlined
	"deepschemaref",   // schema $refs into another schema's properties or items, or an operation's body: moved into components
	"binarybodies",    // a body in several binary media types: one Body field (oapi-codegen declares one per type)
	"gonames",         // path parameters named like generated variables (w, err, url), CJK names, properties named like members
	"enumvalues",      // enum values a constant of the Go type cannot hold (2.5 in an integer enum), repeats beside x-enum-varnames
	"extensions",      // oapi-codegen extensions in shapes it cannot use (go-swagger's x-go-type object, an x-go-name that is no identifier)
	"textnames",       // names oapi-codegen refuses to copy into Go: a quoted property name, a format, a discriminator key with a backslash
	"textbody",        // text/plain request bodies of an object, a number, a date-time: typed as string
	"equivalentpaths", // paths one template apart (/a/{id}, /a/{name}): the second GET left out of the server (ServeMux would panic)
	"responsetypes",   // inline types of components/responses: declared under the names the strict server uses
	"client",          // client.yaml with -client: oapi-codegen's client and IdempotentClient beside the server
	"clientonly",      // client.yaml with -client -server=false: models and client only
	"overlay",         // an unmarked openapi.yaml marked by overlay.yaml (Options.Overlays)
}

// goldenOverlays are the cases generated with overlays: the files of their directory.
var goldenOverlays = map[string][]string{"overlay": {"overlay.yaml"}}

// goldenRedis are the cases whose generated code imports idem/idemredis, a module of its
// own: idem/idemredis's TestGeneratedCodeCompiles compiles them.
var goldenRedis = map[string]bool{"redisstore": true, "redisonly": true}

// clientSpec is the spec of the client cases.
const clientSpec = "testdata/golden/client.yaml"

// goldenClient are the -client cases and whether they leave the server out.
var goldenClient = map[string]bool{"client": false, "clientonly": true}

// routersSpec is the spec of the router cases.
const routersSpec = "testdata/golden/routers.yaml"

// goldenRouters are the cases whose base idemgen writes for another router than net/http.
var goldenRouters = map[string]string{"chirouter": gen.RouterChi, "echorouter": gen.RouterEcho, "ginrouter": gen.RouterGin}

// goldenExternal are the -base=external cases: ExternalBaseFile is oapi-codegen's own
// output (models, the router's server, strict server) as its command writes it, and
// idemgen writes only idempotent.gen.go beside it.
var goldenExternal = map[string]codegen.GenerateOptions{
	"chiexternal":  {Models: true, ChiServer: true, Strict: true},
	"echoexternal": {Models: true, EchoServer: true, Strict: true},
	"ginexternal":  {Models: true, GinServer: true, Strict: true},
}

// ExternalBaseFile is the file of oapi-codegen's output in the external cases.
const ExternalBaseFile = "api.gen.go"

// sharedSpecs are the golden cases generated from a spec of ../shared/specs, read from
// there (the repository holds no copies), with every POST marked by x-idempotent-defaults.
var sharedSpecs = map[string]string{
	"petstore": "petstore-expanded.yaml",
}

// goldenSpec returns the spec of a golden case: its openapi.yaml or openapi.json,
// routers.yaml for the router cases, or a spec of ../shared/specs marked in a temporary
// copy. Without ../shared the case skips (fails under CI=true).
func goldenSpec(t *testing.T, c string) string {
	dir := filepath.Join("testdata", "golden", c)
	if _, ok := goldenRouters[c]; ok {
		return routersSpec
	}
	if _, ok := goldenExternal[c]; ok {
		return routersSpec
	}
	if _, ok := goldenClient[c]; ok {
		return clientSpec
	}
	name, shared := sharedSpecs[c]
	if !shared {
		if _, err := os.Stat(filepath.Join(dir, "openapi.json")); err == nil {
			return filepath.Join(dir, "openapi.json")
		}
		return filepath.Join(dir, "openapi.yaml")
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "shared", "specs", name))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: the real specs live in ../shared/specs beside the repository", err)
		}
		t.Skipf("%v: the real specs live in ../shared/specs beside the repository", err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, append(data, "x-idempotent-defaults: {methods: [post]}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c, func(t *testing.T) {
			dir := filepath.Join("testdata", "golden", c)
			opts := gen.Options{Spec: goldenSpec(t, c), Package: c, Router: goldenRouters[c], Version: "(devel)"}
			for _, o := range goldenOverlays[c] {
				opts.Overlays = append(opts.Overlays, filepath.Join(dir, o))
			}
			want := []string{gen.BaseFile, gen.SpecFile, gen.IdempotentFile}
			if only, ok := goldenClient[c]; ok {
				opts.Client, opts.ClientOnly = true, only
				want = []string{gen.BaseFile, gen.ClientFile, gen.SpecFile, gen.IdempotentFile}
				if only {
					want = want[:2]
				}
			}
			if g, ok := goldenExternal[c]; ok {
				compareGolden(t, dir, gen.File{Name: ExternalBaseFile, Data: oapiCodegen(t, opts.Spec, c, g)})
				opts.Base, opts.Dir, want = gen.BaseExternal, dir, want[1:]
			}
			files, err := gen.Generate(opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(files), want) {
				t.Fatalf("files = %v, want %v", names(files), want)
			}
			for _, f := range files {
				checkHeader(t, f)
				compareGolden(t, dir, f)
			}
		})
	}
}

// compareGolden compares f with its golden file in dir, or writes it there with -update.
func compareGolden(t *testing.T, dir string, f gen.File) {
	t.Helper()
	p := filepath.Join(dir, f.Name)
	if *update {
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./gen -update)", err)
	}
	if !bytes.Equal(f.Data, want) {
		t.Errorf("%s differs from the golden file; if the change is intended, run go test ./gen -update and review the diff", p)
	}
}

// oapiCodegen returns what the oapi-codegen command (at gen.OapiCodegenVersion) writes
// for spec with a configuration of package pkg and generate g: its loader, its
// generator, its formatting. Its header names the main module of the running binary,
// which here is idemgen's test: the command's own module is put back.
func oapiCodegen(t *testing.T, spec, pkg string, g codegen.GenerateOptions) []byte {
	t.Helper()
	doc, err := util.LoadSwagger(spec)
	if err != nil {
		t.Fatal(err)
	}
	v := gen.OapiCodegenVersion
	code, err := codegen.Generate(doc, codegen.Configuration{PackageName: pkg, Generate: g, NoVCSVersionOverride: &v})
	if err != nil {
		t.Fatal(err)
	}
	const self = "// Code generated by github.com/idemgen/idemgen version "
	if !strings.Contains(code, self) {
		t.Fatalf("oapi-codegen's header changed:\n%.300s", code)
	}
	return []byte(strings.Replace(code, self, "// Code generated by github.com/oapi-codegen/oapi-codegen/v2 version ", 1))
}

// TestDeterministic generates one spec twice and compares the bytes.
func TestDeterministic(t *testing.T) {
	opts := gen.Options{Spec: "testdata/golden/collisions/openapi.yaml", Package: "collisions"}
	a, err := gen.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gen.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !bytes.Equal(a[i].Data, b[i].Data) {
			t.Errorf("%s: two runs differ", a[i].Name)
		}
	}
}

var codeGenerated = "// Code generated by idemgen (devel), DO NOT EDIT."

func checkHeader(t *testing.T, f gen.File) {
	t.Helper()
	// The Go convention (go help generate): a line matching ^// Code generated .* DO NOT EDIT\.$
	// before the first non-comment, non-blank text.
	for _, line := range strings.Split(string(f.Data), "\n") {
		if line == codeGenerated {
			return
		}
		if line != "" && !strings.HasPrefix(line, "//") {
			break
		}
	}
	t.Errorf("%s: no %q line before the package clause", f.Name, codeGenerated)
}

func names(files []gen.File) []string {
	var n []string
	for _, f := range files {
		n = append(n, f.Name)
	}
	return n
}

// TestCompile builds every golden package with the go command (go vet: type-checked and
// vetted), except the router cases: chi, echo and gin are no dependencies of this module,
// and gen/internal/e2e (a module of its own) compiles and serves those; and the Redis
// cases, compiled by idem/idemredis (also a module of its own). The real specs are
// compiled by gen/internal/corpus.
func TestCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds generated packages with the go command")
	}
	var pkgs []string
	for _, c := range goldenCases {
		if _, ok := goldenRouters[c]; ok {
			continue
		}
		if _, ok := goldenExternal[c]; ok {
			continue
		}
		if goldenRedis[c] {
			continue
		}
		pkgs = append(pkgs, "./testdata/golden/"+c)
	}
	cmd := exec.Command("go", append([]string{"vet"}, pkgs...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go vet of the generated packages: %v\n%s", err, out)
	}
}

// TestErrors: each broken spec gives exactly these located errors.
func TestErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"duplicate-operationid.yaml", `testdata/errors/duplicate-operationid.yaml:13:20: operationId "makeA" of POST /b is also the operationId of POST /a (testdata/errors/duplicate-operationid.yaml:7:20): operation ids are unique in a spec`},
		{"unknown-field.yaml", `testdata/errors/unknown-field.yaml:8:9: x-idempotent.leese: unknown field, did you mean lease? (want one of header, body, required, lease, retention, timeout, wait, isolation, store, fingerprint-headers)`},
		// A mistyped field names the closest one (edit distance, case ignored); a field
		// close to none names none.
		{"field-typos.yaml", strings.Join([]string{
			`testdata/errors/field-typos.yaml:4:3: x-idempotent-defaults.method: unknown field, did you mean methods? (want one of header, body, required, lease, retention, timeout, wait, isolation, store, fingerprint-headers, methods)`,
			`testdata/errors/field-typos.yaml:10:9: x-idempotent.isolaton: unknown field, did you mean isolation? (want one of header, body, required, lease, retention, timeout, wait, isolation, store, fingerprint-headers)`,
			`testdata/errors/field-typos.yaml:11:9: x-idempotent.Lease: unknown field, did you mean lease? (want one of header, body, required, lease, retention, timeout, wait, isolation, store, fingerprint-headers)`,
			`testdata/errors/field-typos.yaml:12:9: x-idempotent.fingerprint_headers: unknown field, did you mean fingerprint-headers? (want one of header, body, required, lease, retention, timeout, wait, isolation, store, fingerprint-headers)`,
			`testdata/errors/field-typos.yaml:13:9: x-idempotent.colour: unknown field (want one of header, body, required, lease, retention, timeout, wait, isolation, store, fingerprint-headers)`,
		}, "\n")},
		{"bad-duration.yaml", `testdata/errors/bad-duration.yaml:8:16: x-idempotent.lease: "5 minutes" is not a duration (want e.g. "30s", "5m", "24h")`},
		{"lease-zero.yaml", `testdata/errors/lease-zero.yaml:8:16: x-idempotent.lease: "0s" must be positive`},
		{"store.yaml", strings.Join([]string{
			`testdata/errors/store.yaml:8:16: x-idempotent.store: "memcached" is not a store (want "postgres", the default: the key commits with the business; or "redis", for operations whose rare duplicate is acceptable)`,
			`testdata/errors/store.yaml:16:20: x-idempotent.isolation: POST /follows keeps its keys in Redis (store: redis): its business gets no transaction, so no isolation level; drop one of them`,
		}, "\n")},
		{"lease-submillisecond.yaml", `testdata/errors/lease-submillisecond.yaml:8:16: x-idempotent.lease: "500us" is shorter than the 1ms minimum`},
		{"body-several-types.yaml", `testdata/errors/body-several-types.yaml:8:15: x-idempotent.body: POST /orders accepts several request content types (application/json, multipart/form-data); a key in the body is read from JSON and form bodies only: accept only those, or take the key from a header`},
		{"field-twice.yaml", `testdata/errors/field-twice.yaml:9:9: duplicate key "lease" (first at 8:9)`},
		{"required-contradicts-header.yaml", `testdata/errors/required-contradicts-header.yaml:8:19: x-idempotent.required: false, but the spec declares header Idempotency-Key as required: true`},
		{"swagger2.yaml", `testdata/errors/swagger2.yaml:1:1: swagger "2.0": a Swagger 2.0 document; idemgen reads OpenAPI 3.0 and 3.1 (convert it first, e.g. with npx swagger2openapi)`},
		{"retention-short.yaml", `testdata/errors/retention-short.yaml:9:20: x-idempotent.retention: 1m is shorter than the lease (2m): a completed answer must be replayable for at least as long as a claim can block retries`},
		// A value inherited from x-idempotent-defaults is named as the defaults' field, with
		// the operation whose own lease it conflicts with; a lease past the default retention
		// is the lease's error.
		{"retention-short-defaults.yaml", strings.Join([]string{
			`testdata/errors/retention-short-defaults.yaml:4:14: x-idempotent-defaults.retention: 1m is shorter than the lease of POST /orders (2m): a completed answer must be replayable for at least as long as a claim can block retries`,
			`testdata/errors/retention-short-defaults.yaml:4:14: x-idempotent-defaults.retention: 1m is shorter than the lease of POST /refunds (48h): a completed answer must be replayable for at least as long as a claim can block retries`,
		}, "\n")},
		{"lease-past-retention.yaml", `testdata/errors/lease-past-retention.yaml:8:16: x-idempotent.lease: 48h is longer than the retention (24h, the default): a completed answer must be replayable for at least as long as a claim can block retries; set retention too`},
		{"bad-header.yaml", `testdata/errors/bad-header.yaml:8:17: x-idempotent.header: "Idempotency Key" is not a valid HTTP header name (RFC 9110 token)`},
		{"body-missing-field.yaml", `testdata/errors/body-missing-field.yaml:8:15: x-idempotent.body: "/idem_key": the request body schema has no property "idem_key" there`},
		{"body-not-string.yaml", `testdata/errors/body-not-string.yaml:8:15: x-idempotent.body: "/amount": the property has type integer, and a key must be a string`},
		{"body-no-body.yaml", `testdata/errors/body-no-body.yaml:9:15: x-idempotent.body: POST /jobs/{id}/run has no JSON or form request body to read the key from`},
		{"safe-method.yaml", `testdata/errors/safe-method.yaml:9:7: x-idempotent: GET /orders is a safe method, idempotent by definition; mark operations that change state (POST, PUT, PATCH, DELETE)`},
		{"wrong-type.yaml", `testdata/errors/wrong-type.yaml:7:21: x-idempotent: want true or an object, got "yes"`},
		{"bad-isolation.yaml", `testdata/errors/bad-isolation.yaml:8:20: x-idempotent.isolation: "snapshot" is not an isolation level (want "serializable", "repeatable read", "read committed" or "read uncommitted")`},
		{"header-and-body.yaml", `testdata/errors/header-and-body.yaml:9:15: x-idempotent: header and body are exclusive: the key comes from one place`},
		{"bad-defaults.yaml", `testdata/errors/bad-defaults.yaml:5:14: x-idempotent-defaults.retention: "-1h" must be positive`},
		{"required-not-bool.yaml", `testdata/errors/required-not-bool.yaml:8:19: x-idempotent.required: want true or false, got "yes"`},
		// A mistyped marker extension (case ignored, or one edit away) is an error, on an
		// operation, on a path item and at the root: left alone it would turn the
		// protocol off without a word. Other tools' x-idempotency, x-idempotency-key are
		// two edits away or more, and left alone.
		{"marker-typos.yaml", strings.Join([]string{
			`testdata/errors/marker-typos.yaml:3:1: unknown extension x-idempotent-default, did you mean x-idempotent-defaults? (without it the defaults apply to no operation)`,
			`testdata/errors/marker-typos.yaml:7:5: unknown extension x-idempotant, did you mean x-idempotent? (an operation without the marker runs without the protocol)`,
			`testdata/errors/marker-typos.yaml:10:7: unknown extension x-idempotant, did you mean x-idempotent? (an operation without the marker runs without the protocol)`,
			`testdata/errors/marker-typos.yaml:15:7: unknown extension X-Idempotent, did you mean x-idempotent? (an operation without the marker runs without the protocol)`,
			`testdata/errors/marker-typos.yaml:20:7: unknown extension x-idempotnet, did you mean x-idempotent? (an operation without the marker runs without the protocol)`,
		}, "\n")},
		{"path-item-marker.yaml", `testdata/errors/path-item-marker.yaml:5:5: x-idempotent: belongs on an operation (get, post, ...), not on the path item /orders`},
		{"dangling-ref.yaml", `testdata/errors/dangling-ref.yaml:13:21: $ref "#/components/schemas/Missing" does not resolve: nothing at that path in this document` + "\n" +
			`testdata/errors/dangling-ref.yaml:19:30: $ref "#/components/schemas/Gone" does not resolve: nothing at that path in this document`},
		{"ref-path-item.yaml", `testdata/errors/ref-path-item.yaml:5:11: x-idempotent: POST /a is marked in the path item this $ref names, in another file; idemgen reads markers in the spec file only: move the path item into this file (or under its components, with a $ref to it)`},
		// A path item two paths share through a $ref within the file is one operation to
		// oapi-codegen: a marker on it, or its operationId, would name two.
		{"shared-path-item.yaml", `testdata/errors/shared-path-item.yaml:6:7: x-idempotent: POST /orders: its path item is also that of /v1/orders (through a $ref), and oapi-codegen generates one operation for all of them, which a policy per path cannot wrap; give each of /orders, /v1/orders a path item of its own (a copy) to mark it`},
		{"shared-operation-id.yaml", `testdata/errors/shared-operation-id.yaml:7:11: path /v1/orders: this $ref names the path item of /orders too: its operationId "createOrder" (testdata/errors/shared-operation-id.yaml:12:22) would name both POST /orders and POST /v1/orders, and operation ids are unique in a spec; give the path a path item of its own`},
		{"not-yaml.yaml", `testdata/errors/not-yaml.yaml:8:6: did not find expected key (while parsing a block mapping at 5:5)`},
		// The parser notices these a line late: the place is the end of the line with the
		// mistake (the missing '}', the missing closing quote).
		{"unclosed-flow.yaml", `testdata/errors/unclosed-flow.yaml:7:35: did not find expected ',' or '}' (noticed at 9:16, while parsing a flow mapping at 7:21)`},
		{"unclosed-quote.yaml", `testdata/errors/unclosed-quote.yaml:3:16: did not find expected key (noticed at 4:13, while parsing a block mapping at 3:3)`},
		{"json-syntax.json", `testdata/errors/json-syntax.json:5:65: invalid character '}' looking for beginning of object key string`},
		{"duplicate-key.yaml", `testdata/errors/duplicate-key.yaml:9:7: duplicate key "operationId" (first at 6:7)`},
		{"several-key-headers.yaml", `testdata/errors/several-key-headers.yaml:7:7: x-idempotent: POST /orders declares several headers that could carry the idempotency key (Idempotency-Key, x-idempotency-key): name the one with x-idempotent: {header: NAME}`},
		{"header-not-string.yaml", `testdata/errors/header-not-string.yaml:7:7: x-idempotent.header: the declared header parameter "Idempotency-Key" must have a string schema to carry the key (it has type integer)`},
		// A key pattern that is not ECMA-262 is located at the pattern, inline or in a
		// $ref'd parameter.
		{"bad-pattern.yaml", "testdata/errors/bad-pattern.yaml:11:43: x-idempotent: the key's pattern \"^[a-z]+($\" is not an ECMA-262 regular expression: error parsing regexp: missing closing ) in `^[a-z]+($`\n" +
			"testdata/errors/bad-pattern.yaml:29:18: x-idempotent: the key's pattern \"(?<=a\" is not an ECMA-262 regular expression: error parsing regexp: missing closing ) in `(?<=a`"},
		// Issue 17: the key a spec declares, found by its name, in several places; only
		// in a query parameter; a body key named like one that is not a string.
		{"several-key-places.yaml", `testdata/errors/several-key-places.yaml:7:7: x-idempotent: POST /orders declares several places that could carry the idempotency key (header Idempotency-Key, body /idempotency_key): name the one with x-idempotent: {header: NAME} or {body: /POINTER}`},
		{"query-key-only.yaml", `testdata/errors/query-key-only.yaml:7:7: x-idempotent: POST /orders declares the idempotency key as a query parameter (idempotency_key): idemgen reads a key from a header or the body; declare it as a header too and name it with x-idempotent: {header: NAME}, or mark the operation with x-idempotent: false`},
		{"body-key-not-string.yaml", `testdata/errors/body-key-not-string.yaml:7:7: x-idempotent (the body's /IdempotencyKey is named like an idempotency key): "/IdempotencyKey": the property has type integer, and a key must be a string`},
		// A bundler's content $ref that names no content map, a media type $ref that names
		// no media type object, one to another file: every place at once, located
		// (kin-openapi's own message has no position); one that names nothing is a
		// dangling $ref.
		{"content-ref.yaml", strings.Join([]string{
			`testdata/errors/content-ref.yaml:10:17: content: $ref "#/components/mediaTypes/Order" names no content map (media type → media type object): which media type it is for is unknown; OpenAPI takes no $ref for content: write the media types inline, or point the $ref at a content map`,
			`testdata/errors/content-ref.yaml:15:19: content: $ref "#/components/mediaTypes/Order" names no content map (media type → media type object): which media type it is for is unknown; OpenAPI takes no $ref for content: write the media types inline, or point the $ref at a content map`,
			`testdata/errors/content-ref.yaml:19:19: $ref "#/components/mediaTypes/Missing" does not resolve: nothing at that path in this document`,
			`testdata/errors/content-ref.yaml:26:19: content: media type $ref "#/components/mediaTypes/Content" names no media type object (schema, example, encoding): write it inline, or point the $ref at one`,
			`testdata/errors/content-ref.yaml:31:19: content: $ref "other.yaml#/Content" is not in this document; OpenAPI takes no $ref for content or a media type: write them inline`,
		}, "\n")},
		{"methods-safe.yaml", `testdata/errors/methods-safe.yaml:4:19: x-idempotent-defaults.methods: GET is a safe method, idempotent by definition; name methods that change state (post, put, patch, delete)` + "\n" +
			`testdata/errors/methods-safe.yaml:4:24: x-idempotent-defaults.methods: "fetch" is not a method idemgen marks (want post, put, patch, delete)`},
		{"fingerprint-undeclared.yaml", `testdata/errors/fingerprint-undeclared.yaml:8:31: x-idempotent.fingerprint-headers: POST /orders declares no header parameter X-Dry-Run (only declared headers reach the handler)`},
		{"fingerprint-cookie.yaml", `testdata/errors/fingerprint-cookie.yaml:8:31: x-idempotent.fingerprint-headers: POST /orders declares session as a cookie (in: cookie), not a header: cookies are never part of the fingerprint`},
		// Each fingerprint header in error is located at its item, in flow and block lists
		// and in JSON.
		{"fingerprint-items.yaml", strings.Join([]string{
			`testdata/errors/fingerprint-items.yaml:10:31: x-idempotent.fingerprint-headers: POST /orders declares no header parameter X-Nope (only declared headers reach the handler)`,
			`testdata/errors/fingerprint-items.yaml:10:39: x-idempotent.fingerprint-headers: POST /orders declares session as a cookie (in: cookie), not a header: cookies are never part of the fingerprint`,
			`testdata/errors/fingerprint-items.yaml:23:13: x-idempotent.fingerprint-headers: Idempotency-Key is the idempotency key, not a part of the request it identifies`,
			`testdata/errors/fingerprint-items.yaml:24:13: x-idempotent.fingerprint-headers: POST /refunds declares session as a cookie (in: cookie), not a header: cookies are never part of the fingerprint`,
		}, "\n")},
		{"fingerprint-items.json", strings.Join([]string{
			`testdata/errors/fingerprint-items.json:10:35: x-idempotent.fingerprint-headers: POST /orders declares no header parameter X-Nope (only declared headers reach the handler)`,
			`testdata/errors/fingerprint-items.json:10:45: x-idempotent.fingerprint-headers: POST /orders declares session as a cookie (in: cookie), not a header: cookies are never part of the fingerprint`,
		}, "\n")},
		{"streaming.yaml", `testdata/errors/streaming.yaml:7:7: x-idempotent: POST /completions answers with a stream (text/event-stream): a stream cannot be recorded and replayed; leave the operation unmarked, or drop the streaming response`},
		{"path-template.yaml", `testdata/errors/path-template.yaml:4:3: path /things/{thing_id}: POST /things/{thing_id} does not declare the template parameter "thing_id" (a parameter with in: path)` + "\n" +
			`testdata/errors/path-template.yaml:15:17: parameter "site_id" (in: path) of POST /invoices/{invoice_id}/pay is not in the path template`},
		// Parameters and responses OpenAPI does not allow (oapi-codegen would panic on an
		// unknown in, refuse a parameter without a schema, or bind one of two), each where
		// it is declared, components included.
		{"parameters.yaml", strings.Join([]string{
			`testdata/errors/parameters.yaml:7:10: parameter "tenant" (in: header) of path /orders is declared twice in one list (first at 6:10): a parameter is unique by name and in`,
			`testdata/errors/parameters.yaml:11:18: parameter "q" (in: query) has neither a schema nor a content map: OpenAPI requires one of them`,
			`testdata/errors/parameters.yaml:12:28: parameter "body": in: body is not a parameter location (want path, query, header or cookie; a Swagger 2.0 body or formData parameter is a requestBody in OpenAPI 3)`,
			`testdata/errors/parameters.yaml:15:11: parameter "filter" (in: query): content must hold exactly one media type`,
			`testdata/errors/parameters.yaml:19:17: parameter "page" (in: query) of POST /orders is declared twice in one list (first at 18:17): a parameter is unique by name and in`,
			`testdata/errors/parameters.yaml:22:9: response "2xx" of POST /orders: a response key is a status code (201), a range in upper case (2XX) or default`,
			`testdata/errors/parameters.yaml:23:9: response "200 OK" of POST /orders: a response key is a status code (201), a range in upper case (2XX) or default`,
			`testdata/errors/parameters.yaml:27:20: parameter "orphan" (in: query) has neither a schema nor a content map: OpenAPI requires one of them`,
		}, "\n")},
		// A path or a parameter name oapi-codegen refuses to copy into Go: each at its
		// place, all at once (a schema with such a name is simplified instead: golden
		// textnames).
		{"unwritable.yaml", strings.Join([]string{
			"testdata/errors/unwritable.yaml:7:3: oapi-codegen cannot write the path \"/notes/`raw`\" into Go (it holds a quote, a backtick or a control character), and the server routes by it; change the path",
			`testdata/errors/unwritable.yaml:14:10: oapi-codegen cannot write the parameter name "x\"y" into Go (it holds a quote, a backtick or a control character), and the server needs it as written; rename the parameter`,
			`testdata/errors/unwritable.yaml:23:11: oapi-codegen cannot write the parameter name "a\tb" into Go (it holds a quote, a backtick or a control character), and the server needs it as written; rename the parameter`,
		}, "\n")},
		// A marked operation whose route another path serves (one template apart).
		{"equivalent-paths.yaml", `testdata/errors/equivalent-paths.yaml:14:5: POST /things/{name} is POST /things/{id} with other parameter names, which OpenAPI forbids and a server cannot route apart; merge the two paths`},
		// An invalid spec is reported as such before anything else: no warning about the
		// schema idemgen would type loosely, no oapi-codegen message.
		{"invalid-first.yaml", strings.Join([]string{
			`testdata/errors/invalid-first.yaml:8:3: path /a/{id}: POST /a/{id} does not declare the template parameter "id" (a parameter with in: path)`,
			`testdata/errors/invalid-first.yaml:21:30: $ref "#/components/schemas/Gone" does not resolve: nothing at that path in this document`,
			`testdata/errors/invalid-first.yaml:24:20: operationId "makeA" of POST /b is also the operationId of POST /a/{id} (testdata/errors/invalid-first.yaml:10:20): operation ids are unique in a spec`,
		}, "\n")},
		// Every error of a marker at once: a field in error does not hide the checks of the
		// others against each other and the operation; a check that needs the field in
		// error (retention against a lease that is not a duration) is left out.
		{"marker-all-errors.yaml", strings.Join([]string{
			`testdata/errors/marker-all-errors.yaml:8:18: x-idempotent.timeout: "forever" is not a duration (want e.g. "30s", "5m", "24h")`,
			`testdata/errors/marker-all-errors.yaml:10:20: x-idempotent.retention: 1m is shorter than the lease (2m): a completed answer must be replayable for at least as long as a claim can block retries`,
			`testdata/errors/marker-all-errors.yaml:11:31: x-idempotent.fingerprint-headers: POST /orders declares no header parameter X-Dry-Run (only declared headers reach the handler)`,
			`testdata/errors/marker-all-errors.yaml:18:16: x-idempotent.lease: "5 minutes" is not a duration (want e.g. "30s", "5m", "24h")`,
			`testdata/errors/marker-all-errors.yaml:20:31: x-idempotent.fingerprint-headers: POST /refunds declares no header parameter X-Dry-Run (only declared headers reach the handler)`,
			`testdata/errors/marker-all-errors.yaml:26:7: x-idempotent: GET /reports is a safe method, idempotent by definition; mark operations that change state (POST, PUT, PATCH, DELETE)`,
			`testdata/errors/marker-all-errors.yaml:27:20: x-idempotent.isolation: "snapshot" is not an isolation level (want "serializable", "repeatable read", "read committed" or "read uncommitted")`,
		}, "\n")},
		// Every error of a run at once: markers, defaults, paths, duplicate keys, $refs.
		{"many.yaml", strings.Join([]string{
			`testdata/errors/many.yaml:4:10: x-idempotent-defaults.lease: "10 seconds" is not a duration (want e.g. "30s", "5m", "24h")`,
			`testdata/errors/many.yaml:6:3: path /orders/{id}: POST /orders/{id} does not declare the template parameter "id" (a parameter with in: path)`,
			`testdata/errors/many.yaml:10:20: x-idempotent.retention: "forever" is not a duration (want e.g. "30s", "5m", "24h")`,
			`testdata/errors/many.yaml:11:9: x-idempotent.colour: unknown field (want one of header, body, required, lease, retention, timeout, wait, isolation, store, fingerprint-headers)`,
			`testdata/errors/many.yaml:14:9: duplicate key "201" (first at 13:9)`,
			`testdata/errors/many.yaml:18:28: $ref "#/components/schemas/Order" does not resolve: nothing at that path in this document`,
		}, "\n")},
	} {
		t.Run(c.file, func(t *testing.T) {
			var warnings []string
			_, err := gen.Generate(gen.Options{Spec: "testdata/errors/" + c.file, Package: "x", Warnf: func(format string, args ...any) {
				warnings = append(warnings, fmt.Sprintf(format, args...))
			}})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range warnings {
				if strings.Contains(w, "oapi-codegen") {
					t.Errorf("a spec with errors got a warning of the base: %s", w)
				}
			}
			if got := err.Error(); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if gen.Errors(err) == nil {
				t.Errorf("error is not located: %T", err)
			}
		})
	}
}

// TestLoadErrorLocated: a kin-openapi load error points at the $ref it is about.
func TestLoadErrorLocated(t *testing.T) {
	_, err := gen.Generate(gen.Options{Spec: "testdata/errors/external-missing.yaml", Package: "x"})
	want := `testdata/errors/external-missing.yaml:11:28: error resolving reference "no-such-file.yaml#/Order": open `
	if err == nil || !strings.HasPrefix(err.Error(), want) || gen.Errors(err) == nil {
		t.Fatalf("err = %v\nwant prefix %s", err, want)
	}
}

// TestLoadErrorAtPointer: a kin-openapi load error that names a JSON pointer is located
// there.
func TestLoadErrorAtPointer(t *testing.T) {
	_, err := gen.Generate(gen.Options{Spec: "testdata/errors/load-pointer.yaml", Package: "x"})
	want := "testdata/errors/load-pointer.yaml:16:45: failed to unmarshal data: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || gen.Errors(err) == nil {
		t.Fatalf("err = %v\nwant prefix %s", err, want)
	}
}

// TestExternalBaseMissing: -base=external into a directory without oapi-codegen's output
// fails and says what is missing.
func TestExternalBaseMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := gen.Generate(gen.Options{Spec: "testdata/golden/bodykey/openapi.yaml", Package: "bodykey", Base: gen.BaseExternal, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "does not declare CreatePaymentRequestObject, CreatePaymentResponseObject") {
		t.Fatalf("err = %v", err)
	}
	var located *gen.Error
	if errors.As(err, &located) {
		t.Errorf("a missing base is not a spec error: %v", err)
	}
}

// TestExternalBaseUndeclaredHeader: with -base=external idemgen cannot add the key header
// to oapi-codegen's Params, so the spec must declare it.
func TestExternalBaseUndeclaredHeader(t *testing.T) {
	_, err := gen.Generate(gen.Options{Spec: "testdata/golden/truemarker/openapi.yaml", Package: "truemarker", Base: gen.BaseExternal, Dir: "testdata/golden/truemarker"})
	want := "testdata/golden/truemarker/openapi.yaml:9:7: x-idempotent: with -base=external the spec must declare the key header parameter Idempotency-Key (in: header): the package's oapi-codegen output has no field for it otherwise"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
}

// TestExternalBase: -base=external next to oapi-codegen's output writes the same layer.
func TestExternalBase(t *testing.T) {
	// The golden base is oapi-codegen's output for this spec (a body key: idemgen adds no
	// header); put under oapi-codegen's own header, it stands for a package that runs
	// oapi-codegen itself.
	dir := t.TempDir()
	ours, err := os.ReadFile("testdata/golden/bodykey/" + gen.BaseFile)
	if err != nil {
		t.Fatal(err)
	}
	theirs := bytes.Replace(ours, []byte("// Code generated by idemgen (devel), DO NOT EDIT."), []byte("// Code generated by github.com/oapi-codegen/oapi-codegen/v2 version v2.8.2 DO NOT EDIT."), 1)
	if err := os.WriteFile(filepath.Join(dir, "api.gen.go"), theirs, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(gen.Options{Spec: "testdata/golden/bodykey/openapi.yaml", Package: "bodykey", Base: gen.BaseExternal, Dir: dir, Version: "(devel)"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/golden/bodykey/" + gen.IdempotentFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Name != gen.SpecFile || files[1].Name != gen.IdempotentFile || !bytes.Equal(files[1].Data, want) {
		t.Errorf("external base: got %v, want only %s and %s as in the golden case", names(files), gen.SpecFile, gen.IdempotentFile)
	}
}

// TestExternalBaseLostBodyJSON: with -base=external, a marked operation whose JSON request
// body type in oapi-codegen's output lost the union's JSON methods (an inline oneOf: its
// issue 2498) is an error at its marker; a union held in a component is not; and output
// whose request body type forwards the methods (as oapi-codegen's fix does) passes.
func TestExternalBaseLostBodyJSON(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	err := os.WriteFile(spec, []byte(`openapi: "3.0.3"
info: {title: t, version: "1"}
paths:
  /payments:
    post:
      operationId: createPayment
      x-idempotent: true
      parameters:
        - {name: Idempotency-Key, in: header, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema:
              oneOf: [{$ref: '#/components/schemas/Card'}, {$ref: '#/components/schemas/Bank'}]
      responses:
        '201': {description: created}
  /refunds:
    post:
      operationId: createRefund
      x-idempotent: true
      parameters:
        - {name: Idempotency-Key, in: header, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Refund'}
      responses:
        '201': {description: created}
components:
  schemas:
    Refund:
      oneOf: [{$ref: '#/components/schemas/Card'}, {$ref: '#/components/schemas/Bank'}]
    Card: {type: object, properties: {card: {type: string}}}
    Bank: {type: object, properties: {iban: {type: string}}}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	theirs := oapiCodegen(t, spec, "api", codegen.GenerateOptions{Models: true, StdHTTPServer: true, Strict: true})
	if err := os.WriteFile(filepath.Join(dir, "api.gen.go"), theirs, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := gen.Options{Spec: spec, Package: "api", Base: gen.BaseExternal, Dir: dir}
	_, err = gen.Generate(opts)
	errs := gen.Errors(err)
	want := spec + ":7:7: x-idempotent: POST /payments: with -base=external, the package's CreatePaymentJSONRequestBody is a defined type of CreatePaymentJSONBody without its MarshalJSON/UnmarshalJSON"
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
		t.Fatalf("err = %v\nwant one error starting %s", err, want)
	}
	forward := "\nfunc (b CreatePaymentJSONRequestBody) MarshalJSON() ([]byte, error) { return CreatePaymentJSONBody(b).MarshalJSON() }\n" +
		"func (b *CreatePaymentJSONRequestBody) UnmarshalJSON(data []byte) error { return (*CreatePaymentJSONBody)(b).UnmarshalJSON(data) }\n"
	if err := os.WriteFile(filepath.Join(dir, "api.gen.go"), append(theirs, forward...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Generate(opts); err != nil {
		t.Errorf("with forwarding methods: %v", err)
	}
}

// TestUnknownRouter: a router idemgen writes no base for is an error that lists the others.
func TestUnknownRouter(t *testing.T) {
	_, err := gen.Generate(gen.Options{Spec: routersSpec, Package: "x", Router: "fiber"})
	if want := `unknown router "fiber" (want std-http, chi, echo, gin)`; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

// TestExternalBaseNotIdemgens: idemgen's own oapi.gen.go (from a run without
// -base=external) is not an external base: generating with external would remove it and
// leave a package that does not build. It is refused, saying why.
func TestExternalBaseNotIdemgens(t *testing.T) {
	dir := t.TempDir()
	spec := "testdata/golden/bodykey/openapi.yaml"
	files, err := gen.Generate(gen.Options{Spec: spec, Package: "bodykey", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	_, err = gen.Generate(gen.Options{Spec: spec, Package: "bodykey", Base: gen.BaseExternal, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "oapi.gen.go there was written by idemgen") {
		t.Fatalf("err = %v, want a refusal naming idemgen's oapi.gen.go", err)
	}
}

// TestPolicyCommentCookies: declared cookie parameters are never in the fingerprint; the
// policy comment lists them beside the headers left out, so a reviewer sees it.
func TestPolicyCommentCookies(t *testing.T) {
	files, err := gen.Generate(gen.Options{Spec: "testdata/golden/keyspec/openapi.yaml", Package: "keyspec"})
	if err != nil {
		t.Fatal(err)
	}
	layer := string(files[len(files)-1].Data)
	want := "// Declared headers outside the fingerprint (a retry may change them): X-Request-Id.\n" +
		"// Declared cookies outside the fingerprint (a retry may change them): session.\n"
	if !strings.Contains(layer, want) {
		t.Errorf("%s lacks\n%s", gen.IdempotentFile, want)
	}
}

// TestWiringCommentUsesTheStoresErrorHandler: the wiring the doc comment of
// NewIdempotentStrictServer shows, for every router, gives the server the store's
// RequestErrorHandler (the protocol's own rejection shape, WithRejectionRenderer's when
// set), never the package-level idem.RequestErrorHandler or idem.WriteProblem, which
// always write problem+json: following the comment gives a client one error shape.
func TestWiringCommentUsesTheStoresErrorHandler(t *testing.T) {
	for _, router := range gen.Routers {
		t.Run(router, func(t *testing.T) {
			files, err := gen.Generate(gen.Options{Spec: routersSpec, Package: "api", Router: router})
			if err != nil {
				t.Fatal(err)
			}
			doc := funcDoc(t, files, "NewIdempotentStrictServer")
			if !strings.Contains(doc, "store.RequestErrorHandler") {
				t.Errorf("the doc comment does not wire store.RequestErrorHandler:\n%s", doc)
			}
			for _, other := range []string{"idem.RequestErrorHandler", "idem.WriteProblem"} {
				if strings.Contains(doc, other) {
					t.Errorf("the doc comment wires %s, whose problem+json ignores the store's renderer:\n%s", other, doc)
				}
			}
		})
	}
}

// funcDoc returns the doc comment of function name in the generated idempotent file.
func funcDoc(t *testing.T, files []gen.File, name string) string {
	t.Helper()
	for _, f := range files {
		if f.Name != gen.IdempotentFile {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f.Name, f.Data, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range parsed.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name && fn.Doc != nil {
				return fn.Doc.Text()
			}
		}
	}
	t.Fatalf("%s: no documented func %s", gen.IdempotentFile, name)
	return ""
}

// TestWarnings: every guess idemgen makes about the key is a warning (and a line of the
// policy comment, in the golden files), with its position; a spec that declares its key
// plainly gets none.
func TestWarnings(t *testing.T) {
	for _, c := range []struct {
		golden string
		want   []string
	}{
		{"bodykeys", []string{
			"testdata/golden/bodykeys/openapi.yaml:56:7: x-idempotent: POST /refunds: the key is the added header Idempotency-Key; the request body's /idempotency_token has a name that speaks of idempotency: if it is the key, mark the operation with x-idempotent: {body: /idempotency_token}",
			"testdata/golden/bodykeys/openapi.yaml:56:7: x-idempotent: POST /refunds: the key is the added header Idempotency-Key; the request body's /request_id has a description that speaks of idempotency: if it is the key, mark the operation with x-idempotent: {body: /request_id}",
		}},
		{"convention", []string{
			"testdata/golden/convention/openapi.yaml:15:5: 1 unmarked operation(s) declare an idempotency key (POST /invoices): they run without the protocol, and their key reaches the handler as an ordinary parameter or field; mark them (x-idempotent, or x-idempotent-defaults.methods), or opt them out with x-idempotent: false",
			"testdata/golden/convention/openapi.yaml:25:7: x-idempotent: POST /refunds declares no idempotency key: the added header is named X-Idempotency-Key, as 2 operation(s) of the spec name their key header",
		}},
		{"caseheader", []string{
			"testdata/golden/caseheader/openapi.yaml:9:7: x-idempotent: POST /orders: the spec declares the key header 2 times, differing only in case (idempotency-key, Idempotency-Key): one header, Idempotency-Key, with the stricter of each rule: required, minLength 8, maxLength 64",
		}},
		{"keyplaces", []string{
			"testdata/golden/keyplaces/openapi.yaml:11:5: 1 safe operation(s) declare an idempotency key header (GET /orders): idemgen does not mark safe methods (idempotent by definition), so no protocol reads their key; it reaches the handler as an ordinary header parameter",
			"testdata/golden/keyplaces/openapi.yaml:17:5: x-idempotent: POST /orders: the query parameter idempotency_key is not read as the key (the key is header Idempotency-Key); it is an ordinary query parameter, part of the fingerprint",
			"testdata/golden/keyplaces/openapi.yaml:39:7: x-idempotent: POST /payments: the spec also declares header Idempotency-Key, named like an idempotency key, which is not read as the key (the key is body /idempotency_key, as body: names it)",
		}},
		{"ecmapattern", nil},
		{"contentref", nil},
		{"keyspec", nil},
	} {
		t.Run(c.golden, func(t *testing.T) {
			var got []string
			opts := gen.Options{Spec: goldenSpec(t, c.golden), Package: c.golden, Warnf: func(format string, args ...any) {
				got = append(got, fmt.Sprintf(format, args...))
			}}
			if _, err := gen.Generate(opts); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestWarningsOrder: the operations x-idempotent-defaults.methods left unmarked are
// warned about before the summary they explain (no operation is marked).
func TestWarningsOrder(t *testing.T) {
	_, warnings := generateWarnings(t, `openapi: "3.0.3"
info: {title: t, version: "1"}
x-idempotent-defaults: {methods: [post]}
paths:
  /events:
    post:
      operationId: streamEvents
      responses:
        '200':
          description: a stream
          content:
            text/event-stream:
              schema: {type: string}
`)
	if len(warnings) != 2 || !strings.Contains(warnings[0], "POST /events is left unmarked") || !strings.Contains(warnings[1], "no operation is marked") {
		t.Errorf("warnings:\n%s\nwant the unmarked POST /events first, then no operation is marked", strings.Join(warnings, "\n"))
	}
}

// A Redis operation whose timeout outlasts its lease is warned about: the Redis lease is
// not extended while the business runs, so a slow business loses its key to a retry.
func TestWarningRedisLeaseShorterThanTimeout(t *testing.T) {
	spec, got := generateWarnings(t, `openapi: "3.0.3"
info: {title: t, version: "1"}
paths:
  /likes:
    post:
      operationId: like
      x-idempotent: {store: redis, lease: 5s, timeout: 10s}
      responses:
        '204': {description: liked}
  /follows:
    post:
      operationId: follow
      x-idempotent: {store: redis, lease: 10s, timeout: 10s}
      responses:
        '204': {description: followed}
`)
	want := spec + ":7:7: x-idempotent: POST /likes keeps its key in Redis (store: redis) with a lease (5s) shorter than its timeout (10s): the Redis lease is not extended while the business runs, so a business past 5s loses its key to a retry, which runs it again; set lease to at least the timeout"
	if len(got) != 1 || got[0] != want {
		t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}

// A wait longer than the timeout is warned about: the owner answers or is cut off within
// its timeout, so the rest of the wait holds the duplicate for nothing.
func TestWarningWaitLongerThanTimeout(t *testing.T) {
	spec, got := generateWarnings(t, `openapi: "3.0.3"
info: {title: t, version: "1"}
paths:
  /payments:
    post:
      operationId: pay
      x-idempotent: {wait: 1m, timeout: 10s}
      responses:
        '201': {description: paid}
  /refunds:
    post:
      operationId: refund
      x-idempotent: {wait: 10s, timeout: 10s}
      responses:
        '201': {description: refunded}
  /transfers:
    post:
      operationId: transfer
      x-idempotent: {wait: 1m}
      responses:
        '201': {description: transferred}
`)
	want := spec + ":7:7: x-idempotent: POST /payments makes a duplicate wait up to 1m for the key's owner, longer than the owner's business may run (timeout 10s): by then the owner has answered, is finishing its commit, or was cut off, so most of the wait past the timeout only holds the duplicate's request; set wait to at most the timeout"
	if len(got) != 1 || got[0] != want {
		t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}

// generateWarnings writes spec (YAML) to a file, generates it in package api, and returns
// the file's path and the warnings the run gave, in order.
func generateWarnings(t *testing.T, spec string) (path string, warnings []string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Generate(gen.Options{Spec: path, Package: "api", Warnf: func(format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf(format, args...))
	}}); err != nil {
		t.Fatal(err)
	}
	return path, warnings
}

// TestDegradedSchemaIsWarnedLocated generates a spec with a schema oapi-codegen cannot type
// (a 3.1 type array of two scalars): the generation succeeds, and one warning names the
// schema at its line and column and what idemgen typed it as.
func TestDegradedSchemaIsWarnedLocated(t *testing.T) {
	text, err := os.ReadFile("testdata/golden/degraded/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path, warnings := generateWarnings(t, string(text))
	var found []string
	for _, w := range warnings {
		if strings.Contains(w, "json.RawMessage") {
			found = append(found, w)
		}
	}
	want := path + ":23:9: components.schemas.Thing.properties.amount: oapi-codegen cannot type this schema (unhandled Schema type"
	if len(found) != 1 || !strings.HasPrefix(found[0], want) {
		t.Fatalf("warnings %q; want one that starts %q", warnings, want)
	}
}
