package model

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/gen/internal/marker"
	"github.com/idemgen/idemgen/gen/internal/spec"
)

// Fuzz targets of the marker reader. Their seed corpora are in testdata/fuzz/<FuzzName>/
// (plus the f.Add seeds), so `go test` runs every seed as an ordinary test. To search:
//
//	go test ./gen -run '^$' -fuzz FuzzMarker -fuzztime 30s
//	go test ./gen -run '^$' -fuzz FuzzSpecMarkers -fuzztime 30s

// markerSpec is a small valid spec; the fuzzed marker text replaces MARKER (as the value
// of x-idempotent on POST /payments, indented under it).
const markerSpec = `openapi: "3.0.3"
info: {title: t, version: "1"}
x-idempotent-defaults:
  lease: 10s
paths:
  /payments/{id}:
    post:
      operationId: createPayment
      x-idempotent: MARKER
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                key: {type: string}
                amount: {type: integer}
      responses:
        "201": {description: created}
`

// FuzzMarker checks the reading of one x-idempotent value (and, through buildOps, its
// checks against the operation): it never panics, and every error it reports is located
// (file, line and column inside the document) and names the marker.
func FuzzMarker(f *testing.F) {
	for _, s := range []string{
		"true", "false", "{}", "null", "[]", "42", `"yes"`,
		"{lease: 5s, retention: 1h, timeout: 2s, required: true, isolation: serializable}",
		"{header: X-Request-Id}", "{body: /key}", "{body: /amount}", "{body: /nope}", "{body: key}",
		"{header: 'bad header'}", "{header: X, body: /key}", "{lease: 0s}", "{lease: -1s}", "{lease: forever}",
		"{lease: 5}", "{required: yes}", "{isolation: 'Repeatable   Read'}", "{isolation: snapshot}", "{unknown: 1}",
		"\n        lease: 5s\n        timeout: 1s", "\n        - a\n        - b", "&a {lease: 1s}", "*a",
		"{lease: !!binary aGVsbG8=}", "{? [a, b] : c}", "{lease: 1h, lease: 2h}", "!!map {}", "'\x00'",
		"{store: redis}", "{store: PostgreSQL}", "{store: redis, isolation: serializable}", "{store: mongo}", "{store: 1}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, marker string) {
		doc := strings.Replace(markerSpec, "MARKER", marker, 1)
		checkMarkersLocated(t, []byte(doc), !strings.Contains(marker, "$ref"))
	})
}

// FuzzSpecMarkers does the same for whole documents: markers anywhere, document defaults,
// path items, broken YAML.
func FuzzSpecMarkers(f *testing.F) {
	f.Add([]byte(strings.Replace(markerSpec, "MARKER", "true", 1)))
	f.Add([]byte(strings.Replace(markerSpec, "MARKER", "{body: /key, lease: 1s}", 1)))
	f.Add([]byte("paths:\n  /a:\n    x-idempotent: true\n    get:\n      x-idempotent: true\n"))
	f.Add([]byte("x-idempotent-defaults: true\npaths: {}\n"))
	f.Add([]byte("x-idempotent-defaults: {lease: 1s, header: X-Key}\npaths: {/a: {post: {x-idempotent: {}}}}\n"))
	f.Add([]byte("paths: [1, 2]\n"))
	f.Add([]byte("- not a mapping\n"))
	f.Add([]byte("a: b: c\n"))
	f.Add([]byte("paths:\n\t/a: x\n"))
	f.Add([]byte("{\"paths\": {\"/a\": {\"put\": {\"x-idempotent\": {\"lease\": \"1s\"}}}}}"))
	f.Add([]byte("paths:\n  /a:\n    post:\n      x-idempotent: {header: X}\n      parameters: [{$ref: '#/nope'}]\n"))
	// The key a spec declares (keyfind.go): a body property, a header twice in two cases,
	// a query parameter beside it.
	f.Add([]byte("paths:\n  /a:\n    post:\n      x-idempotent: true\n      requestBody: {content: {application/json: {schema: {type: object, required: [idempotency_key], properties: {idempotency_key: {type: string}}}}}}\n"))
	f.Add([]byte("paths:\n  /a:\n    post:\n      x-idempotent: true\n      parameters: [{name: idempotency-key, in: header, schema: {type: string, minLength: 2}}, {name: Idempotency-Key, in: header, required: true}, {name: idempotency_key, in: query}]\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkMarkersLocated(t, doc, !bytes.Contains(doc, []byte("$ref")))
	})
}

// checkMarkersLocated runs the marker reader as Generate does (source, $refs, markers;
// then, when load is set, kin-openapi and buildModel, also for markers in error, as
// Generate does to report all their errors) and checks that it does not panic and that
// every error is located.
func checkMarkersLocated(t *testing.T, doc []byte, load bool) {
	t.Helper()
	const file = "openapi.yaml"
	lines := bytes.Count(doc, []byte("\n")) + 1
	located := func(e *spec.Error, needLine bool) {
		t.Helper()
		if e.Pos.File != file || e.Msg == "" {
			t.Fatalf("error without file or message: %#v", e)
		}
		if needLine && (e.Pos.Line < 1 || e.Pos.Col < 1 || e.Pos.Line > lines) {
			t.Fatalf("error not located in the %d-line document: %q (%s)", lines, e.Error(), doc)
		}
		if !strings.HasPrefix(e.Error(), e.Pos.String()+": ") {
			t.Fatalf("error text %q does not start with its position %s", e.Error(), e.Pos)
		}
	}
	parsed, err := spec.ParseSource(file, doc)
	if err != nil {
		es := spec.Errors(err)
		if len(es) != 1 {
			t.Fatalf("parseSource error is not a located *Error: %T %v", err, err)
		}
		located(es[0], false) // YAML syntax errors carry a line when the YAML parser gives one
		return
	}
	src := &source{&marker.Source{Source: parsed}}
	var errs spec.ErrorList
	src.CheckTree(&errs)
	_, ops := src.ReadMarkers(&errs)
	for _, e := range errs {
		located(e, true)
		if !strings.Contains(e.Msg, marker.MarkerExt) && !strings.HasPrefix(e.Msg, "$ref") && !strings.HasPrefix(e.Msg, "duplicate key") {
			t.Fatalf("error does not name the marker, the $ref or the duplicate key: %q", e.Msg)
		}
	}
	for _, o := range ops {
		if o.Marker.Pos.Line < 1 {
			t.Fatalf("marker of %s %s has no position", o.Method, o.Path)
		}
		if o.Marker.Lease.Set && o.Marker.Lease.V <= 0 || o.Marker.Timeout.Set && o.Marker.Timeout.V <= 0 || o.Marker.Retention.Set && o.Marker.Retention.V <= 0 {
			t.Fatalf("a non-positive duration was accepted: %+v", o.Marker)
		}
		if o.Marker.Header.Set && o.Marker.Body.Set {
			t.Fatalf("header and body both accepted: %+v", o.Marker)
		}
	}
	if !load || len(ops) == 0 {
		return
	}
	// No file is read: documents with a $ref are not loaded (load is false for them).
	path := filepath.Join(string(filepath.Separator), "idemgen-fuzz-nonexistent", file)
	d, err := spec.LoadDoc(path, doc)
	if err != nil || d.Paths == nil {
		return // kin-openapi's own errors are located by locateLoadError, tested elsewhere
	}
	n0 := len(errs)
	built := src.buildModel(d, ops, &errs)
	for _, e := range errs[n0:] {
		located(e, true)
		if !strings.Contains(e.Msg, marker.MarkerExt) {
			t.Fatalf("error does not name the marker: %q", e.Msg)
		}
	}
	for _, o := range built.Ops {
		if (o.Key.Header == "") == (o.Key.Body == "") || o.Lease <= 0 || o.Retention <= 0 || o.Name == "" {
			t.Fatalf("inconsistent operation model: %+v", o)
		}
	}
}
