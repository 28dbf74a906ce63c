package gen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

// overlaySpec is the unmarked spec of the overlay golden case.
const overlaySpec = "testdata/golden/overlay/openapi.yaml"

// writeFile writes text to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// overlayOf is an Overlay 1.0 document of the actions (YAML list items, indented two).
func overlayOf(actions string) string {
	return "overlay: 1.0.0\ninfo:\n  title: t\n  version: 1.0.0\nactions:\n" + actions
}

// TestOverlayErrorsLocated: what an overlay wrote is reported at its place in the
// overlay file, whether the overlay inserted it or replaced a value the spec had.
func TestOverlayErrorsLocated(t *testing.T) {
	dir := t.TempDir()
	marked := writeFile(t, dir, "marked.yaml", strings.Replace(mustRead(t, overlaySpec),
		"      operationId: addPet\n", "      operationId: addPet\n      x-idempotent:\n        lease: 30s\n", 1))
	for _, c := range []struct {
		name, spec, overlay, want string
	}{
		{"inserted", overlaySpec, overlayOf(`  - target: $.paths['/pets'].post
    update:
      x-idempotent:
        lease: 5 minutes
`), `OVERLAY:9:16: x-idempotent.lease: "5 minutes" is not a duration (want e.g. "30s", "5m", "24h")`},
		{"replaced in place", marked, overlayOf(`  - target: $.paths['/pets'].post.x-idempotent
    update:
      lease: 5 minutes
`), `OVERLAY:8:14: x-idempotent.lease: "5 minutes" is not a duration (want e.g. "30s", "5m", "24h")`},
		{"defaults at the root", overlaySpec, overlayOf(`  - target: $
    update:
      x-idempotent-defaults:
        lease: 5 minutes
`), `OVERLAY:9:16: x-idempotent-defaults.lease: "5 minutes" is not a duration`},
		{"unknown field", overlaySpec, overlayOf(`  - target: $.paths['/pets'].post
    update:
      x-idempotent: {leese: 10s}
`), `OVERLAY:8:22: x-idempotent.leese: unknown field, did you mean lease?`},
		{"target selects nothing", overlaySpec, overlayOf(`  - target: $.paths['/pet'].post
    update:
      x-idempotent: true
`), `OVERLAY:6:13: overlay action 1: target "$.paths['/pet'].post" selects nothing in the spec`},
		{"not an overlay", overlaySpec, "openapi: 3.0.3\ninfo: {title: t, version: 1.0.0}\npaths: {}\n", `OVERLAY:1:1: invalid overlay:`},
		{"syntax", overlaySpec, "overlay: 1.0.0\nactions:\n  - target: [\n", `OVERLAY:`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "-")+".overlay.yaml", c.overlay)
			_, err := gen.Generate(gen.Options{Spec: c.spec, Package: "api", Overlays: []string{o}})
			if err == nil {
				t.Fatal("no error")
			}
			want := strings.ReplaceAll(c.want, "OVERLAY", o)
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error:\n%v\nwant it to start with:\n%s", err, want)
			}
		})
	}
}

// TestOverlaysInOrder: overlays apply in order, a later one over an earlier one, and the
// policies (gen.PoliciesOverlaid) are the overlaid document's, the marker located in the
// overlay that wrote it.
func TestOverlaysInOrder(t *testing.T) {
	dir := t.TempDir()
	first := writeFile(t, dir, "first.yaml", overlayOf(`  - target: $.paths['/pets'].post
    update:
      x-idempotent: {lease: 30s}
  - target: $.paths['/pets/{id}'].delete
    update:
      x-idempotent: true
`))
	second := writeFile(t, dir, "second.yaml", overlayOf(`  - target: $.paths['/pets'].post.x-idempotent
    update:
      lease: 10s
  - target: $.paths['/pets/{id}'].delete.x-idempotent
    remove: true
`))
	ps, _, err := gen.PoliciesOverlaid(overlaySpec, []string{first, second})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Operation != "addPet" || ps[0].Lease.String() != "10s" {
		t.Fatalf("policies = %+v, want addPet alone with lease 10s", ps)
	}
	if ps[0].Pos.File != first {
		t.Errorf("addPet's marker at %s, want it in %s", ps[0].Pos, first)
	}
	if ps, _, err := gen.Policies(overlaySpec); err != nil || len(ps) != 0 {
		t.Errorf("without overlays: policies %v, %v; want none", ps, err)
	}
}

// TestOverlayMarksSharedPetstore: the unmarked petstore of ../shared/specs, marked by an
// overlay (addPet), generates, and the package compiles.
func TestOverlayMarksSharedPetstore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generated package with the go command")
	}
	spec := filepath.Join("..", "..", "shared", "specs", "petstore-expanded.yaml")
	if _, err := os.Stat(spec); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: the real specs live in ../shared/specs beside the repository", err)
		}
		t.Skipf("%v: the real specs live in ../shared/specs beside the repository", err)
	}
	o := writeFile(t, t.TempDir(), "overlay.yaml", overlayOf(`  - target: $.paths.*.post[?(@.operationId == 'addPet')]
    update:
      x-idempotent: {required: true, lease: 10s}
`))
	var warnings []string
	files, err := gen.Generate(gen.Options{Spec: spec, Package: "petoverlay", Overlays: []string{o}, Version: "(devel)",
		Warnf: func(f string, args ...any) { warnings = append(warnings, f) }})
	if err != nil {
		t.Fatal(err)
	}
	var layer string
	for _, f := range files {
		if f.Name == gen.IdempotentFile {
			layer = string(f.Data)
		}
	}
	if !strings.Contains(layer, "var addPetPolicy = ") {
		t.Fatalf("%s has no addPetPolicy", gen.IdempotentFile)
	}
	// Compiled inside the module (the generated code imports idem).
	out, err := os.MkdirTemp("testdata", "overlaypetstore")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	for _, f := range files {
		writeFile(t, out, f.Name, string(f.Data))
	}
	if b, err := exec.Command("go", "vet", "./"+filepath.ToSlash(out)).CombinedOutput(); err != nil {
		t.Fatalf("go vet of the overlaid petstore: %v\n%s", err, b)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
