package idemvalidate_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/idem/idemvalidate"
)

// answerCase is a request to the payments example's spec and the middleware's answer:
// status 0 when passed on, else the status and the error's text, whole, and its cause's.
type answerCase struct {
	method, path, ctype, body string
	status                    int
	err, cause                string
	headers                   string // "Name: value" lines, for parameters
}

// answerCases are the bad inputs docs/reliability.md lists for the validator (a required
// field missing, a value under its minimum, a string for an integer, malformed JSON, data
// after the value, a body over the limit, case variants) and their neighbours, with the
// answers as they were before the validator was made cheaper (issue #26).
var answerCases = []answerCase{
	{"POST", "/payments", "application/json", `{"amount":1999,"currency":"EUR","description":"Order #1042"}`, 0, "", "", ""},
	{"POST", "/payments", "application/json", `{"currency":"EUR"}`, 400, "request does not match the spec: request body: /amount: property \"amount\" is missing", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /amount: property \"amount\" is missing", ""},
	{"POST", "/payments", "application/json", `{"amount":0,"currency":"EUR"}`, 400, "request does not match the spec: request body: /amount: number must be at least 1", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /amount: number must be at least 1", ""},
	{"POST", "/payments", "application/json", `{"amount":100000000001,"currency":"EUR"}`, 400, "request does not match the spec: request body: /amount: number must be at most 1e+11", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /amount: number must be at most 1e+11", ""},
	{"POST", "/payments", "application/json", `{"amount":"5","currency":"EUR"}`, 400, "request does not match the spec: request body: /amount: value must be an integer", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /amount: value must be an integer", ""},
	{"POST", "/payments", "application/json", `{"amount":1.5,"currency":"EUR"}`, 400, "request does not match the spec: request body: /amount: value must be an integer", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /amount: value must be an integer", ""},
	{"POST", "/payments", "application/json", `{"amount":5,"currency":"eur"}`, 400, "request does not match the spec: request body: /currency: string doesn't match the regular expression \"^[A-Z]{3}$\"", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /currency: string doesn't match the regular expression \"^[A-Z]{3}$\"", ""},
	{"POST", "/payments", "application/json", `{"amount":5,"currency":null}`, 400, "request does not match the spec: request body: /currency: Value is not nullable", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /currency: Value is not nullable", ""},
	{"POST", "/payments", "application/json", longDescription, 400, "request does not match the spec: request body: /description: maximum string length is 1000", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /description: maximum string length is 1000", ""},
	{"POST", "/payments", "application/json", bigBody, 413, "http: request body too large", "", ""},
	{"POST", "/payments", "application/json", `{"amount": 5}garbage`, 400, "request does not match the spec: request body: invalid character 'g' after top-level value", "invalid character 'g' after top-level value", ""},
	{"POST", "/payments", "application/json", `{"amount": 5,`, 400, "request does not match the spec: request body: unexpected end of JSON input", "unexpected end of JSON input", ""},
	{"POST", "/payments", "application/json", `null`, 400, "request does not match the spec: request body: Value is not nullable", "request body has an error: doesn't match schema #/components/schemas/NewPayment: Value is not nullable", ""},
	{"POST", "/payments", "application/json", `[1]`, 400, "request does not match the spec: request body: value must be an object", "request body has an error: doesn't match schema #/components/schemas/NewPayment: value must be an object", ""},
	{"POST", "/payments", "application/json", `"x"`, 400, "request does not match the spec: request body: value must be an object", "request body has an error: doesn't match schema #/components/schemas/NewPayment: value must be an object", ""},
	{"POST", "/payments", "application/json", ``, 400, "request does not match the spec: request body: value is required but missing", "request body has an error: value is required but missing", ""},
	{"POST", "/payments", "application/json", `   `, 400, "request does not match the spec: request body: failed to decode request body: EOF", "request body has an error: failed to decode request body: EOF", ""},
	{"POST", "/payments", "", `{"amount":5,"currency":"EUR"}`, 400, "request does not match the spec: request body: header Content-Type has unexpected value \"\"", "request body has an error: header Content-Type has unexpected value \"\"", ""},
	{"POST", "/payments", "text/plain", `{"amount":5,"currency":"EUR"}`, 400, "request does not match the spec: request body: header Content-Type has unexpected value \"text/plain\"", "request body has an error: header Content-Type has unexpected value \"text/plain\"", ""},
	{"POST", "/payments", "application/json; charset=utf-8", `{"amount":0,"currency":"EUR"}`, 400, "request does not match the spec: request body: /amount: number must be at least 1", "request body has an error: doesn't match schema #/components/schemas/NewPayment: /amount: number must be at least 1", ""},
	{"POST", "/payments", "application/json", `{"amount":1999,"currency":"EUR","AMOUNT":900000000000000}`, 400, "request does not match the spec: request body: /AMOUNT: member \"AMOUNT\" differs from the declared property \"amount\" only by case", "", ""},
	{"POST", "/payments", "application/json", `{"amount":1999,"Currency":"eur"}`, 400, "request does not match the spec: request body: /Currency: member \"Currency\" differs from the declared property \"currency\" only by case", "", ""},
	{"POST", "/payments", "application/json", `{"amount":1999,"currency":"EUR","extra":1}`, 0, "", "", ""},
	{"POST", "/payments/p1/refunds", "application/json", `{"amount":0}`, 400, "request does not match the spec: request body: /amount: number must be at least 1", "request body has an error: doesn't match schema #/components/schemas/NewRefund: /amount: number must be at least 1", ""},
	{"POST", "/payments/p1/refunds", "application/json", `{"amount":5}`, 0, "", "", ""},
	{"POST", "/payments/p1/refunds", "application/json", `{}`, 400, "request does not match the spec: request body: /amount: property \"amount\" is missing", "request body has an error: doesn't match schema #/components/schemas/NewRefund: /amount: property \"amount\" is missing", ""},
	{"GET", "/payments/p1", "", ``, 0, "", "", ""},
	{"PUT", "/payments", "application/json", `{}`, 0, "", "", ""},
	{"POST", "/nowhere", "application/json", `{}`, 0, "", "", ""},
}

// TestAnswers: every bad input gets the same status, detail and cause as before.
func TestAnswers(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromFile("../../examples/payments/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkAnswers(t, spec, answerCases)
}

func checkAnswers(t *testing.T, spec *openapi3.T, cases []answerCase) {
	t.Helper()
	for _, c := range cases {
		if got := answer(t, spec, c); got != c {
			t.Errorf("%s %s %q %q:\n got %#v\nwant %#v", c.method, c.path, c.headers, c.body, got, c)
		}
	}
}

func answer(t *testing.T, spec *openapi3.T, c answerCase) answerCase {
	t.Helper()
	got := c
	got.status, got.err, got.cause = 0, "", ""
	validate, err := idemvalidate.Middleware(spec, func(w http.ResponseWriter, r *http.Request, err error) {
		var mb *http.MaxBytesError
		got.status = http.StatusBadRequest
		if errors.As(err, &mb) {
			got.status = http.StatusRequestEntityTooLarge
		}
		got.err = err.Error()
		if cause := errors.Unwrap(err); cause != nil {
			got.cause = cause.Error()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	h := validate(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := httptest.NewRecorder()
	r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	if c.ctype != "" {
		r.Header.Set("Content-Type", c.ctype)
	}
	for line := range strings.Lines(c.headers) {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		r.Header.Add(name, strings.TrimSpace(value))
	}
	r.Body = http.MaxBytesReader(w, r.Body, 2048)
	h.ServeHTTP(w, r)
	return got
}

var (
	longDescription = `{"amount":1,"currency":"EUR","description":"` + strings.Repeat("x", 1001) + `"}`
	bigBody         = `{"amount":1,"currency":"EUR","description":"` + strings.Repeat("x", 3000) + `"}` // over 2048 bytes
)

// paramSpec declares constrained parameters in each place, at the path item and at the
// operation, beside a JSON body.
const paramSpec = `openapi: "3.0.3"
info: {title: t, version: "1"}
paths:
  /accounts/{id}/orders:
    parameters:
      - {name: id, in: path, required: true, schema: {type: integer, minimum: 1}}
      - {name: X-Tenant, in: header, required: true, schema: {type: string, pattern: "^t-[0-9]+$"}}
    post:
      parameters:
        - {name: limit, in: query, schema: {type: integer, maximum: 100}}
        - {name: tags, in: query, schema: {type: array, items: {type: string, enum: [a, b]}}}
        - {name: session, in: cookie, schema: {type: string, minLength: 4}}
        - {name: X-Trace, in: header, schema: {type: string, format: uuid}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, properties: {n: {type: integer, nullable: true}}}
      responses:
        "201": {description: created}
`

var paramCases = []answerCase{
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\n", status: 0, err: "", cause: ""},
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":null}", headers: "X-Tenant: t-1\n", status: 0, err: "", cause: ""},
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":1}", headers: "", status: 400, err: "request does not match the spec: header parameter \"X-Tenant\": value is required but missing", cause: "parameter \"X-Tenant\" in header has an error: value is required but missing"},
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: x\n", status: 400, err: "request does not match the spec: header parameter \"X-Tenant\": string doesn't match the regular expression \"^t-[0-9]+$\"", cause: "parameter \"X-Tenant\" in header has an error: string doesn't match the regular expression \"^t-[0-9]+$\""},
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant:\n", status: 400, err: "request does not match the spec: header parameter \"X-Tenant\": string doesn't match the regular expression \"^t-[0-9]+$\"", cause: "parameter \"X-Tenant\" in header has an error: string doesn't match the regular expression \"^t-[0-9]+$\""},
	{method: "POST", path: "/accounts/0/orders", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\n", status: 400, err: "request does not match the spec: path parameter \"id\": number must be at least 1", cause: "parameter \"id\" in path has an error: number must be at least 1"},
	{method: "POST", path: "/accounts/x/orders", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\n", status: 400, err: "request does not match the spec: path parameter \"id\": value x: an invalid integer: invalid syntax", cause: "parameter \"id\" in path has an error: value x: an invalid integer: invalid syntax"},
	{method: "POST", path: "/accounts/7/orders?limit=101", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\n", status: 400, err: "request does not match the spec: query parameter \"limit\": number must be at most 100", cause: "parameter \"limit\" in query has an error: number must be at most 100"},
	{method: "POST", path: "/accounts/7/orders?limit=abc", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\n", status: 400, err: "request does not match the spec: query parameter \"limit\": value abc: an invalid integer: invalid syntax", cause: "parameter \"limit\" in query has an error: value abc: an invalid integer: invalid syntax"},
	{method: "POST", path: "/accounts/7/orders?limit=", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\n", status: 400, err: "request does not match the spec: query parameter \"limit\": empty value is not allowed", cause: "parameter \"limit\" in query has an error: empty value is not allowed"},
	{method: "POST", path: "/accounts/7/orders?tags=a&tags=c", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\n", status: 400, err: "request does not match the spec: query parameter \"tags\": /1: value is not one of the allowed values [\"a\",\"b\"]", cause: "parameter \"tags\" in query has an error: /1: value is not one of the allowed values [\"a\",\"b\"]"},
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\nCookie: session=ab\n", status: 400, err: "request does not match the spec: cookie parameter \"session\": minimum string length is 4", cause: "parameter \"session\" in cookie has an error: minimum string length is 4"},
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":1}", headers: "X-Tenant: t-1\nX-Trace: nope\n", status: 0, err: "", cause: ""},
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":\"x\"}", headers: "X-Tenant: x\n", status: 400, err: "request does not match the spec: header parameter \"X-Tenant\": string doesn't match the regular expression \"^t-[0-9]+$\"", cause: "parameter \"X-Tenant\" in header has an error: string doesn't match the regular expression \"^t-[0-9]+$\""},
	{method: "POST", path: "/accounts/7/orders", ctype: "application/json", body: "{\"n\":\"x\"}", headers: "X-Tenant: t-1\n", status: 400, err: "request does not match the spec: request body: /n: value must be an integer", cause: "request body has an error: doesn't match schema: /n: value must be an integer"},
}

// TestParameterAnswers: a parameter that breaks its schema gets the same status, detail
// and cause as before.
func TestParameterAnswers(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromData([]byte(paramSpec))
	if err != nil {
		t.Fatal(err)
	}
	checkAnswers(t, spec, paramCases)
}
