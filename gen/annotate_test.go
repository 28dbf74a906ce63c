package gen_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

// TestAnnotate: on the unmarked spec of the overlay case, addPet is the one candidate (a
// POST), deletePet (a DELETE with no key) and listPets are not, and the overlay
// CandidateOverlay writes for the candidates generates, marking addPet.
func TestAnnotate(t *testing.T) {
	anns, _, err := gen.Annotate(overlaySpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var cands []gen.Annotation
	for _, a := range anns {
		got = append(got, a.Operation+" "+map[bool]string{true: "candidate", false: "-"}[a.Candidate])
		if a.Candidate && a.Problem == "" {
			cands = append(cands, a)
		}
	}
	if want := "listPets - addPet candidate deletePet -"; strings.Join(got, " ") != want {
		t.Fatalf("annotations %q, want %q", strings.Join(got, " "), want)
	}
	if p := cands[0].Policy; p == nil || p.KeySource != "header Idempotency-Key" || !p.KeyAdded {
		t.Errorf("addPet's policy if marked = %+v, want the added Idempotency-Key", p)
	}
	o := writeFile(t, t.TempDir(), "candidates.yaml", string(gen.CandidateOverlay("candidates", cands)))
	files, err := gen.Generate(gen.Options{Spec: overlaySpec, Package: "api", Overlays: []string{o}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name == gen.IdempotentFile && !strings.Contains(string(f.Data), "var addPetPolicy = ") {
			t.Errorf("the candidates' overlay does not mark addPet")
		}
	}
	anns, _, err = gen.Annotate(overlaySpec, []string{o})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range anns {
		if a.Operation == "addPet" && (!a.Marked || a.Candidate || a.Policy.Pos.File != o) {
			t.Errorf("addPet with the overlay: %+v, want marked at %s", a, filepath.Base(o))
		}
	}
}

// A DELETE that declares a key is a candidate; a POST that answers with a stream is one
// that cannot be marked, and says why; an operation opted out is no candidate.
func TestAnnotateDeclaredKeyAndProblem(t *testing.T) {
	p := writeFile(t, t.TempDir(), "openapi.yaml", `openapi: 3.0.3
info: {title: t, version: 1.0.0}
paths:
  /orders/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string}}
    delete:
      operationId: cancelOrder
      parameters:
        - {name: Idempotency-Key, in: header, schema: {type: string}}
      responses: {"204": {description: cancelled}}
    put:
      operationId: putOrder
      x-idempotent: false
      responses: {"204": {description: stored}}
  /events:
    post:
      operationId: streamEvents
      responses:
        "200":
          description: events
          content: {text/event-stream: {schema: {type: string}}}
`)
	anns, _, err := gen.Annotate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]gen.Annotation{}
	for _, a := range anns {
		by[a.Operation] = a
	}
	if a := by["cancelOrder"]; !a.Candidate || a.Problem != "" || !strings.Contains(a.Why, "declares a key") {
		t.Errorf("cancelOrder: %+v, want a candidate that declares a key", a)
	}
	if a := by["putOrder"]; a.Candidate || !a.OptedOut {
		t.Errorf("putOrder: %+v, want opted out", a)
	}
	if a := by["streamEvents"]; !a.Candidate || !strings.Contains(a.Problem, "stream") {
		t.Errorf("streamEvents: %+v, want a candidate whose marking fails on the stream", a)
	}
}
