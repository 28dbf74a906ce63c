package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// annotate names addPet as the candidate of the unmarked spec, its -overlay-out overlay
// generates (and -only writes the operations named), and with the overlay applied addPet
// is marked.
func TestAnnotate(t *testing.T) {
	spec := overlayCase + "openapi.yaml"
	code, out, stderr := run("annotate", spec)
	if code != ExitOK {
		t.Fatalf("annotate: exit %d: %s", code, stderr)
	}
	var addPet string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "addPet ") {
			addPet = l
		}
		if strings.HasPrefix(l, "deletePet ") && strings.Contains(l, "yes:") {
			t.Errorf("deletePet (a DELETE with no key) is a candidate: %s", l)
		}
	}
	if !strings.Contains(addPet, "yes: a POST") || !strings.Contains(addPet, "header Idempotency-Key (ADDED)") {
		t.Errorf("addPet's line %q, want a candidate with the added header; output:\n%s", addPet, out)
	}
	if !strings.Contains(out, "3 operations, 0 marked, 1 candidate") {
		t.Errorf("no summary:\n%s", out)
	}

	dir := t.TempDir()
	ov := filepath.Join(dir, "candidates.yaml")
	if code, _, stderr := run("annotate", "-overlay-out", ov, spec); code != ExitOK {
		t.Fatalf("annotate -overlay-out: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run("generate", "-overlay", ov, "-package", "api", "-o", filepath.Join(dir, "api"), spec); code != ExitOK {
		t.Fatalf("generate with the candidates' overlay: exit %d: %s", code, stderr)
	}
	layer, err := os.ReadFile(filepath.Join(dir, "api", "idempotent.gen.go"))
	if err != nil || !strings.Contains(string(layer), "var addPetPolicy = ") {
		t.Errorf("the candidates' overlay does not mark addPet (%v)", err)
	}
	if _, out, _ := run("annotate", "-overlay", ov, spec); !strings.Contains(out, "3 operations, 1 marked, 0 candidates") {
		t.Errorf("annotate -overlay: addPet not marked:\n%s", out)
	}

	only := filepath.Join(dir, "only.yaml")
	if code, _, stderr := run("annotate", "-only", "deletePet", "-overlay-out", only, spec); code != ExitOK {
		t.Fatalf("annotate -only deletePet: exit %d: %s", code, stderr)
	}
	if data, _ := os.ReadFile(only); !strings.Contains(string(data), `$.paths['/pets/{id}'].delete`) || strings.Contains(string(data), "addPet") {
		t.Errorf("-only deletePet wrote:\n%s", data)
	}
	if code, _, stderr := run("annotate", "-only", "nosuch", "-overlay-out", only, spec); code != ExitUsage || !strings.Contains(stderr, "nosuch names no operation") {
		t.Errorf("-only nosuch: exit %d: %s", code, stderr)
	}
}

// annotate -w -only writes the marker into the spec as one added line, and refuses
// -overlay.
func TestAnnotateWrite(t *testing.T) {
	orig, err := os.ReadFile(overlayCase + "openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(spec, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run("annotate", "-w", "-only", "addPet", spec); code != ExitOK {
		t.Fatalf("annotate -w: exit %d: %s", code, stderr)
	}
	got, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(orig), "      operationId: addPet\n", "      x-idempotent: true\n      operationId: addPet\n", 1)
	if string(got) != want {
		t.Errorf("annotate -w wrote:\n%s", got)
	}
	if code, out, _ := run("policies", spec); code != ExitOK || !strings.Contains(out, "addPet") {
		t.Errorf("policies after -w: exit %d:\n%s", code, out)
	}
	if code, _, _ := run("annotate", "-w", "-overlay", overlayCase+"overlay.yaml", spec); code != ExitUsage {
		t.Errorf("-w -overlay: exit %d, want %d", code, ExitUsage)
	}
}

// annotateWarningsSpec has a marked operation with warnings of its own (a Redis lease
// shorter than its timeout; a body property that may be the key), a candidate whose
// marking would warn of that property too, and warnings about the spec as a whole (a
// safe operation and an unmarked one that declare a key).
const annotateWarningsSpec = `openapi: 3.0.3
info: {title: t, version: 1.0.0}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: {store: redis, lease: 5s, timeout: 10s}
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                requestId: {type: string, description: makes the request idempotent}
      responses: {"201": {description: created}}
  /refunds:
    post:
      operationId: createRefund
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                requestId: {type: string, description: makes the request idempotent}
      responses: {"201": {description: created}}
  /orders/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string}}
    delete:
      parameters:
        - {name: Idempotency-Key, in: header, schema: {type: string}}
      responses: {"204": {description: cancelled}}
    get:
      parameters:
        - {name: Idempotency-Key, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
`

// annotate prints the warnings under the operation each is about, located (a candidate's:
// those marking it would give, at the operation), then those about the spec as a whole.
func TestAnnotateWarningsByOperation(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(spec, []byte(annotateWarningsSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run("annotate", spec)
	if code != ExitOK || stderr != "" {
		t.Fatalf("annotate: exit %d, stderr %q", code, stderr)
	}
	_, section, ok := strings.Cut(out, "\n\n")
	if !ok {
		t.Fatalf("no warnings after the table:\n%s", out)
	}
	want := []string{
		"5 warnings:",
		"  createOrder (POST /orders):",
		"    " + spec + ":7:7: x-idempotent: POST /orders keeps its key in Redis (store: redis) with a lease (5s) shorter than its timeout (10s)",
		"    " + spec + ":7:7: the key is the added header Idempotency-Key; the request body's /requestId has a description that speaks of idempotency",
		"  createRefund (POST /refunds), if marked x-idempotent: true:",
		"    " + spec + ":17:5: the key is the added header Idempotency-Key; the request body's /requestId has a description that speaks of idempotency",
		"  about the spec as a whole:",
		"    " + spec + ":34:5: 1 safe operation(s) declare an idempotency key header (GET /orders/{id})",
		"    " + spec + ":30:5: 1 unmarked operation(s) declare an idempotency key (DELETE /orders/{id})",
	}
	got := strings.Split(strings.TrimSuffix(section, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("warnings: %d lines, want %d:\n%s", len(got), len(want), section)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d:\n%s\nwant it to start with\n%s", i+1, got[i], want[i])
		}
	}
}

// refPathItems is a spec with path items that are $refs, within it and to payouts.yaml
// beside it.
const refPathItems = "../../../../gen/testdata/refpathitems/"

// annotate lists the operations of path items that are $refs; -w marks one in the file
// where it is written and -overlay-out targets it there, and one in another file is
// refused, located at its $ref.
func TestAnnotateRefPathItems(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	for _, name := range []string{"openapi.yaml", "payouts.yaml"} { // -w writes into the spec
		data, err := os.ReadFile(refPathItems + name)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := run("annotate", spec)
	if code != ExitOK || !strings.Contains(out, "4 operations, 0 marked, 2 candidates") ||
		!strings.Contains(out, "cannot be marked: its path item is in another file (payouts.yaml#/Payouts, the $ref at "+spec+":11:11)") {
		t.Fatalf("annotate: exit %d: %s\n%s", code, out, stderr)
	}
	ov := filepath.Join(dir, "candidates.yaml")
	if code, _, stderr := run("annotate", "-overlay-out", ov, spec); code != ExitOK {
		t.Fatalf("annotate -overlay-out: exit %d: %s", code, stderr)
	}
	if code, out, stderr := run("policies", "-overlay", ov, spec); code != ExitOK || !strings.Contains(out, "createRefund") {
		t.Errorf("policies with the candidates' overlay: exit %d:\n%s%s", code, out, stderr)
	}
	if code, _, stderr := run("annotate", "-w", "-only", "createPayout", spec); code != ExitFail || !strings.Contains(stderr, "the $ref at "+spec+":11:11") {
		t.Errorf("-w -only createPayout: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run("annotate", "-w", spec); code != ExitOK {
		t.Fatalf("annotate -w: exit %d: %s", code, stderr)
	}
	if code, out, stderr := run("policies", spec); code != ExitOK || !strings.Contains(out, "createRefund") || strings.Contains(out, "createPayout") {
		t.Errorf("policies after -w: exit %d:\n%s%s", code, out, stderr)
	}
}
