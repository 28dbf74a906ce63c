package idemvalidate

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

const caseSpec = `openapi: "3.0.3"
info: {title: t, version: "1"}
paths:
  /payments:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [amount, currency]
              properties:
                amount: {type: integer, minimum: 1, maximum: 100000000000}
                currency: {type: string, pattern: "^[A-Z]{3}$"}
                customer:
                  allOf:
                    - type: object
                      properties:
                        name: {type: string}
                lines:
                  type: array
                  items:
                    type: object
                    properties:
                      sku: {type: string}
                metadata:
                  type: object
                  properties:
                    note: {type: string}
                  additionalProperties: {type: string}
                both: {type: string}
                Both: {type: string}
      responses:
        "201": {description: created}
`

// A JSON member that differs from a declared property only by case is a 400 naming it,
// and the handler never sees the request: encoding/json would decode it into the field
// that openapi3filter validated under its exact name.
func TestCaseVariantIsRefused(t *testing.T) {
	validate := caseMiddleware(t)
	for _, c := range []struct {
		body, want string // want: the detail's start; "" means passed on
	}{
		{`{"amount":1999,"currency":"EUR"}`, ""},
		{`{"amount":1999,"currency":"EUR","AMOUNT":900000000000000}`, `request body: /AMOUNT: member "AMOUNT" differs from the declared property "amount" only by case`},
		{`{"amount":1999,"currency":"EUR","Currency":"eur"}`, `request body: /Currency: member "Currency"`},
		{`{"amount":1999,"Currency":"EUR"}`, `request body: /Currency: member "Currency"`},
		{`{"amount":1999,"currency":"EUR","currency":"EUR","Amount":1}`, `request body: /Amount:`},
		{`{"amount":1999,"currency":"EUR","customer":{"Name":"x"}}`, `request body: /customer/Name: member "Name" differs from the declared property "name"`},
		{`{"amount":1999,"currency":"EUR","lines":[{"sku":"a"},{"SKU":"b"}]}`, `request body: /lines/1/SKU:`},
		// additionalProperties declared: oapi-codegen decodes "note" by exact name and
		// keeps "NOTE" apart, so it is an additional property.
		{`{"amount":1999,"currency":"EUR","metadata":{"note":"a","NOTE":"b"}}`, ""},
		// both spellings declared: each member matches one exactly.
		{`{"amount":1999,"currency":"EUR","both":"a","Both":"b"}`, ""},
		{`{"amount":1999,"currency":"EUR","BOTH":"a"}`, `request body: /BOTH: member "BOTH" differs from the declared property "Both"`},
		{`{"amount":1999,"currency":"EUR","extra":1}`, ""},
	} {
		reached, status, detail := send(validate, c.body)
		switch {
		case c.want == "" && (!reached || status != 0):
			t.Errorf("%s: refused (%d %s), want passed on", c.body, status, detail)
		case c.want != "" && (reached || status != 400 || !strings.HasPrefix(detail, c.want)):
			t.Errorf("%s: reached %v, %d %q, want 400 %q...", c.body, reached, status, detail, c.want)
		}
	}
}

// Unicode simple folding, as encoding/json matches names: "ſ" (U+017F) matches "s", the
// Kelvin sign matches "k".
func TestCaseVariantFoldsAsEncodingJSON(t *testing.T) {
	s := &openapi3.Schema{Properties: openapi3.Schemas{"sku": {Value: &openapi3.Schema{}}}}
	for _, name := range []string{"\u017fku", "s\u212Au", "SKU"} {
		var into struct {
			Sku string `json:"sku"`
		}
		body := `{"` + name + `":"x"}`
		if err := json.Unmarshal([]byte(body), &into); err != nil || into.Sku != "x" {
			t.Fatalf("encoding/json does not fill sku from %q (%v): the test's premise is wrong", name, err)
		}
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		var e *Error
		if err := caseVariant(v, s); !errors.As(err, &e) {
			t.Errorf("%q: %v, want a case variant of sku", name, err)
		}
	}
}

func caseMiddleware(t *testing.T) func(http.Handler) http.Handler {
	t.Helper()
	spec, err := openapi3.NewLoader().LoadFromData([]byte(caseSpec))
	if err != nil {
		t.Fatal(err)
	}
	validate, err := Middleware(spec, func(w http.ResponseWriter, r *http.Request, err error) {
		var e *Error
		if errors.As(err, &e) {
			w.Header().Set("X-Detail", e.Detail)
		}
		w.WriteHeader(400)
	})
	if err != nil {
		t.Fatal(err)
	}
	return validate
}

// send posts body through validate and reports whether the next handler got it (and the
// body unchanged), else the status and detail of the refusal.
func send(validate func(http.Handler) http.Handler, body string) (reached bool, status int, detail string) {
	h := validate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reached = string(b) == body
	}))
	req := httptest.NewRequest("POST", "/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if reached {
		return true, 0, ""
	}
	return false, rec.Code, rec.Header().Get("X-Detail")
}
