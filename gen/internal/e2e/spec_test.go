package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/gen/testdata/golden/contentref"
	"github.com/idemgen/idemgen/gen/testdata/golden/multifile"
	"github.com/idemgen/idemgen/gen/testdata/golden/petstore"
	"github.com/idemgen/idemgen/gen/testdata/golden/unicode"
	"github.com/idemgen/idemgen/idem/idemvalidate"
)

// Each generated package carries its own spec (spec.gen.go): OpenAPI() parses it once
// and returns the same document on every call; a spec split over files comes inlined,
// a JSON spec with UTF-16 surrogate pair escapes (which YAML parsers refuse) loads.
func TestGeneratedPackagesCarryTheirSpec(t *testing.T) {
	for _, c := range []struct {
		name  string
		spec  func() (*openapi3.T, error)
		title string
	}{
		{"petstore", petstore.OpenAPI, "Swagger Petstore"},
		{"multifile", multifile.OpenAPI, "A spec split over files"},
		{"unicode", unicode.OpenAPI, "Emoji in descriptions \U0001F44D (valid JSON, refused by YAML parsers)"},
		{"contentref", contentref.OpenAPI, "Content refs"},
	} {
		doc, err := c.spec()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if again, _ := c.spec(); again != doc {
			t.Errorf("%s: OpenAPI() parsed the spec again", c.name)
		}
		if doc.Info == nil || doc.Info.Title != c.title {
			t.Errorf("%s: info %+v, want title %q", c.name, doc.Info, c.title)
		}
	}
	// A bundler's content $refs (which kin-openapi refuses or drops) come resolved: the
	// request body keeps its schema.
	doc, _ := contentref.OpenAPI()
	if op := doc.Paths.Find("/orders").Post; op.RequestBody.Value.Content.Get("application/json").Schema == nil {
		t.Errorf("contentref: POST /orders has no request body schema in the embedded spec")
	}
}

// The inlined multi-file spec validates as the files do: the schema of schemas.yaml (sku
// required, lines[].qty an integer) reaches idemvalidate, case variants included.
func TestMultiFileSpecValidates(t *testing.T) {
	spec, err := multifile.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	validate, err := idemvalidate.Middleware(spec, func(w http.ResponseWriter, r *http.Request, err error) {
		http.Error(w, err.Error(), 400)
	})
	if err != nil {
		t.Fatal(err)
	}
	h := validate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) }))
	for _, c := range []struct {
		body   string
		status int
		names  string
	}{
		{`{"sku":"a","lines":[{"qty":2}]}`, 201, ""},
		{`{"lines":[]}`, 400, "sku"},
		{`{"sku":"a","lines":[{"qty":"two"}]}`, 400, "/lines/0/qty"},
		{`{"sku":"a","lines":[{"QTY":2}]}`, 400, `/lines/0/QTY: member "QTY" differs from the declared property "qty" only by case`},
	} {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.names) {
			t.Errorf("%s: %d %s, want %d naming %q", c.body, rec.Code, rec.Body, c.status, c.names)
		}
	}
}
