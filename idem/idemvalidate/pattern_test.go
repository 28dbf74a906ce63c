package idemvalidate_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/idem/idemvalidate"
)

// patternSpec declares ECMA-262 patterns Go's regexp refuses (a negative lookahead), on a
// header parameter and on a body property.
const patternSpec = `
openapi: "OPENAPI"
info: {title: t, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      parameters:
        - name: X-Idempotency-Key
          in: header
          required: true
          schema: {type: string, pattern: '^(?!\s)(.*)(\S)$|^VERSION$'}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                reference: {type: string, pattern: '^(?!test)[a-z]+$|^VERSION$'}
      responses:
        '201': {description: created}
`

// TestECMAPatterns: the middleware checks ECMA-262 patterns (400 when they do not match),
// in parameters and in the body, for OpenAPI 3.0 and 3.1.
func TestECMAPatterns(t *testing.T) {
	for _, version := range []string{"3.0.3", "3.1.0"} {
		t.Run(version, func(t *testing.T) {
			// kin-openapi caches compiled patterns process-wide, by their text: each
			// subtest has patterns of its own, so that none is matched by a compiler an
			// earlier one left in the cache.
			src := strings.NewReplacer("OPENAPI", version, "VERSION", version).Replace(patternSpec)
			spec, err := openapi3.NewLoader().LoadFromData([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var details []string
			validate, err := idemvalidate.Middleware(spec, func(w http.ResponseWriter, r *http.Request, err error) {
				details = append(details, err.Error())
				w.WriteHeader(http.StatusBadRequest)
			})
			if err != nil {
				t.Fatal(err)
			}
			h := validate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
			for _, c := range []struct {
				key, body string
				want      int
				detail    string
			}{
				{"order-1", `{"reference":"abc"}`, http.StatusCreated, ""},
				{"order-1 ", `{"reference":"abc"}`, http.StatusBadRequest, `header parameter "X-Idempotency-Key"`},
				{"order-1", `{"reference":"testabc"}`, http.StatusBadRequest, "request body: /reference"},
			} {
				details = nil
				req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header["X-Idempotency-Key"] = []string{c.key}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != c.want {
					t.Errorf("key %q, body %s: status %d, want %d (%v)", c.key, c.body, rec.Code, c.want, details)
					continue
				}
				if c.detail != "" && (len(details) != 1 || !strings.Contains(details[0], c.detail)) {
					t.Errorf("key %q, body %s: errors %q, want one naming %s", c.key, c.body, details, c.detail)
				}
			}
			if err := spec.Validate(t.Context(), openapi3.SetRegexCompiler(idemvalidate.CompilePattern)); err != nil {
				t.Errorf("the spec does not validate with CompilePattern: %v", err)
			}
		})
	}
}
