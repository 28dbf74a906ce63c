package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// overlayCase is the golden case of an unmarked spec and the overlay that marks addPet.
const overlayCase = golden + "overlay/"

// generate -overlay writes the golden files of the overlay case; -check compares with the
// overlaid document (without the overlay the files are stale); policies -overlay sees
// the marker, and -against with -against-overlay compares two overlays of one spec.
func TestGenerateOverlay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "api")
	spec, ov := overlayCase+"openapi.yaml", overlayCase+"overlay.yaml"
	if code, _, stderr := run("generate", "-overlay", ov, "-package", "overlay", "-o", dir, spec); code != ExitOK {
		t.Fatalf("generate -overlay: exit %d: %s", code, stderr)
	}
	for _, name := range []string{"idempotent.gen.go", "spec.gen.go"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(overlayCase + name)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from the golden case's", name)
		}
	}
	if code, _, stderr := run("generate", "-check", "-overlay", ov, "-package", "overlay", "-o", dir, spec); code != ExitOK {
		t.Errorf("-check -overlay: exit %d: %s", code, stderr)
	}
	if code, _, _ := run("generate", "-check", "-package", "overlay", "-o", dir, spec); code != ExitFail {
		t.Errorf("-check without the overlay: exit %d, want %d (stale)", code, ExitFail)
	}

	code, out, stderr := run("policies", "-overlay", ov, spec)
	if code != ExitOK || !strings.Contains(out, "addPet") || !strings.Contains(out, "10s") {
		t.Errorf("policies -overlay: exit %d:\n%s%s", code, out, stderr)
	}
	shorter := filepath.Join(t.TempDir(), "shorter.yaml")
	data, err := os.ReadFile(ov)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shorter, []byte(strings.Replace(string(data), "lease: 10s", "lease: 5s", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run("policies", "-overlay", shorter, "-against", spec, "-against-overlay", ov, spec)
	if code != ExitOK || !strings.Contains(out, "10s -> 5s") {
		t.Errorf("policies -against -against-overlay: exit %d:\n%s%s", code, out, stderr)
	}
}

// A mistake an overlay wrote is printed at its FILE:LINE:COL in the overlay.
func TestGenerateOverlayErrorLocated(t *testing.T) {
	ov := filepath.Join(t.TempDir(), "bad.yaml")
	text := "overlay: 1.0.0\ninfo: {title: t, version: 1.0.0}\nactions:\n  - target: $.paths['/pets'].post\n    update:\n      x-idempotent:\n        lease: 5 minutes\n"
	if err := os.WriteFile(ov, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run("generate", "-overlay", ov, "-package", "api", "-o", t.TempDir(), overlayCase+"openapi.yaml")
	if want := ov + `:7:16: x-idempotent.lease: "5 minutes" is not a duration`; code != ExitFail || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant it to start with %s", code, stderr, want)
	}
}
