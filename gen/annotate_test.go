package gen_test

import (
	"os"
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

// refPathItems is a spec with an operation of its own, one whose path item is a $ref to
// components/pathItems (in the file), and one whose path item is in another file
// (payouts.yaml beside it).
const refPathItems = "testdata/refpathitems/"

// copyRefPathItems copies the refPathItems spec and its payouts.yaml into a temporary
// directory, the spec with extra appended, and returns the spec's path and its text.
func copyRefPathItems(t *testing.T, extra string) (path, text string) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"openapi.yaml", "payouts.yaml"} {
		data, err := os.ReadFile(refPathItems + name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "openapi.yaml" {
			text = string(data) + extra
			data = []byte(text)
		}
		writeFile(t, dir, name, string(data))
	}
	return filepath.Join(dir, "openapi.yaml"), text
}

// Annotate lists the operations of a path item that is a $ref: one in the file is a
// candidate marked where it is written, by the overlay as by InsertMarkers, and the
// result generates; one in another file is a candidate that cannot be marked, located at
// the $ref, and InsertMarkers refuses it there.
func TestAnnotateRefPathItems(t *testing.T) {
	p, spec := copyRefPathItems(t, "")
	dir := filepath.Dir(p)
	anns, _, err := gen.Annotate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]gen.Annotation{}
	var got []string
	for _, a := range anns {
		by[a.Operation] = a
		got = append(got, a.Operation)
	}
	if want := "createOrder createRefund listPayouts createPayout"; strings.Join(got, " ") != want {
		t.Fatalf("operations %q, want %q", strings.Join(got, " "), want)
	}
	refund := by["createRefund"]
	if !refund.Candidate || refund.Problem != "" || refund.Pos.Line != 15 || strings.Join(refund.At, " ") != "components pathItems Refunds post" {
		t.Errorf("createRefund: %+v, want a markable candidate at line 15, under components/pathItems", refund)
	}
	payout := by["createPayout"]
	if !payout.Candidate || payout.At != nil || payout.Pos.Line != 11 || !strings.Contains(payout.Problem, "its path item is in another file (payouts.yaml#/Payouts, the $ref at "+p+":11:11)") {
		t.Errorf("createPayout: %+v, want a candidate that cannot be marked, at the $ref", payout)
	}

	ov := string(gen.CandidateOverlay("c", []gen.Annotation{refund}))
	if !strings.Contains(ov, `target: "$.components.pathItems.Refunds.post"`) {
		t.Errorf("the overlay targets createRefund elsewhere:\n%s", ov)
	}
	o := writeFile(t, dir, "candidates.yaml", ov)
	if ps, _, err := gen.PoliciesOverlaid(p, []string{o}); err != nil || len(ps) != 1 || ps[0].Operation != "createRefund" {
		t.Errorf("with the overlay: %+v, %v; want createRefund marked", ps, err)
	}

	text, err := gen.InsertMarkers(p, []gen.Annotation{refund})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(spec, "        operationId: createRefund\n", "        x-idempotent: true\n        operationId: createRefund\n", 1)
	if string(text) != want {
		t.Errorf("InsertMarkers wrote:\n%s", text)
	}
	written := writeFile(t, dir, "written.yaml", string(text))
	files, err := gen.Generate(gen.Options{Spec: written, Package: "api"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name == gen.IdempotentFile && !strings.Contains(string(f.Data), "var createRefundPolicy = ") {
			t.Errorf("the marker written under components/pathItems does not mark createRefund")
		}
	}
	if _, err := gen.InsertMarkers(p, []gen.Annotation{payout}); err == nil ||
		!strings.HasPrefix(err.Error(), p+":11:11: POST /payouts: its path item is in another file (payouts.yaml#/Payouts): cannot write x-idempotent there") {
		t.Errorf("InsertMarkers of createPayout: %v", err)
	}
}

// x-idempotent-defaults.methods cannot mark the POST of a path item in another file: it is
// left unmarked with a warning of its own, not silently.
func TestDefaultsSkipRefPathItemElsewhere(t *testing.T) {
	p, _ := copyRefPathItems(t, "x-idempotent-defaults: {methods: [post]}\n")
	ps, warnings, err := gen.Policies(p)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pol := range ps {
		names = append(names, pol.Operation)
	}
	if strings.Join(names, " ") != "createOrder createRefund" {
		t.Errorf("marked %v, want createOrder createRefund", names)
	}
	want := p + ":11:11: POST /payouts is left unmarked by x-idempotent-defaults.methods: its path item is in another file (payouts.yaml#/Payouts)"
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
		t.Errorf("warnings %q, want one starting %q", warnings, want)
	}
	anns, _, err := gen.Annotate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range anns {
		if a.Operation == "createPayout" && (!a.OptedOut || len(a.Warnings) != 1) {
			t.Errorf("createPayout: %+v, want left unmarked with its warning", a)
		}
	}
}
