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

// InsertMarkers adds lines only, in YAML (block style) and JSON (CRLF kept), and the
// result marks the operations; a flow-style operation is refused, located.
func TestInsertMarkers(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, text, want string }{
		{"openapi.yaml", "openapi: 3.0.3\ninfo: {title: t, version: 1.0.0}\npaths:\n  /a:\n    post:   # create\n      # the id\n      operationId: a\n      responses: {\"201\": {description: ok}}\n",
			"openapi: 3.0.3\ninfo: {title: t, version: 1.0.0}\npaths:\n  /a:\n    post:   # create\n      # the id\n      x-idempotent: true\n      operationId: a\n      responses: {\"201\": {description: ok}}\n"},
		{"openapi.json", "{\r\n\t\"openapi\": \"3.0.3\",\r\n\t\"info\": {\"title\": \"t\", \"version\": \"1.0.0\"},\r\n\t\"paths\": {\"/a\": {\"post\": {\r\n\t\t\"operationId\": \"a\",\r\n\t\t\"responses\": {\"201\": {\"description\": \"ok\"}}}}}\r\n}\r\n",
			"{\r\n\t\"openapi\": \"3.0.3\",\r\n\t\"info\": {\"title\": \"t\", \"version\": \"1.0.0\"},\r\n\t\"paths\": {\"/a\": {\"post\": {\r\n\t\t\"x-idempotent\": true,\r\n\t\t\"operationId\": \"a\",\r\n\t\t\"responses\": {\"201\": {\"description\": \"ok\"}}}}}\r\n}\r\n"},
	} {
		p := writeFile(t, dir, c.name, c.text)
		got, err := gen.InsertMarkers(p, []gen.Annotation{{Method: "POST", Path: "/a"}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, got, c.want)
		}
		writeFile(t, dir, c.name, string(got))
		if ps, _, err := gen.Policies(p); err != nil || len(ps) != 1 {
			t.Errorf("%s marked: %v, %v", c.name, ps, err)
		}
	}
	p := writeFile(t, dir, "flow.yaml", "openapi: 3.0.3\ninfo: {title: t, version: 1.0.0}\npaths:\n  /a:\n    post: {operationId: a, responses: {\"201\": {description: ok}}}\n")
	if _, err := gen.InsertMarkers(p, []gen.Annotation{{Method: "POST", Path: "/a"}}); err == nil || !strings.HasPrefix(err.Error(), p+":5:5: POST /a: the operation is written in flow style") {
		t.Errorf("flow style: %v", err)
	}
}
