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
