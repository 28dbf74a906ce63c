package corpus

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

// noopOverlay sets the spec's info.title to itself: the overlaid document is the spec's.
const noopOverlay = "overlay: 1.0.0\ninfo: {title: no-op, version: 1.0.0}\nactions:\n  - target: $.info\n    copy: $.info\n"

// TestCorpusOverlays: for every real spec (each pinned invalid one aside), an overlay that
// changes nothing gives the same base and layer as no overlay (the node trees go through
// the overlay library and back unchanged), and the overlay idemgen annotate writes for the
// candidates generates, with each of them marked.
func TestCorpusOverlays(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a dozen large specs three times")
	}
	specs := findSpecs(t)
	dir := t.TempDir()
	noop := filepath.Join(dir, "noop.yaml")
	if err := os.WriteFile(noop, []byte(noopOverlay), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, spec := range specs {
		name := filepath.Base(spec)
		if _, ok := invalid[name]; ok {
			continue
		}
		marked := filepath.Join(dir, name)
		if err := os.WriteFile(marked, withDefaults(t, spec), 0o644); err != nil {
			t.Fatal(err)
		}
		plain, err := gen.Generate(gen.Options{Spec: marked, Package: "api", Version: "(devel)"})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		over, err := gen.Generate(gen.Options{Spec: marked, Package: "api", Version: "(devel)", Overlays: []string{noop}})
		if err != nil {
			t.Errorf("%s with a no-op overlay: %v", name, err)
			continue
		}
		for i, f := range plain {
			if f.Name != gen.SpecFile && !bytes.Equal(f.Data, over[i].Data) {
				t.Errorf("%s: %s differs with a no-op overlay", name, f.Name)
			}
		}

		anns, _, err := gen.Annotate(spec, nil)
		if err != nil {
			t.Errorf("%s: annotate: %v", name, err)
			continue
		}
		var cands []gen.Annotation
		for _, a := range anns {
			if a.Candidate && a.Problem == "" {
				cands = append(cands, a)
			}
		}
		ov := filepath.Join(dir, name+".overlay.yaml")
		if err := os.WriteFile(ov, gen.CandidateOverlay("candidates", cands), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := gen.Generate(gen.Options{Spec: spec, Package: "api", Overlays: []string{ov}}); err != nil {
			t.Errorf("%s with the candidates' overlay: %v", name, err)
			continue
		}
		ps, _, err := gen.PoliciesOverlaid(spec, []string{ov})
		if err != nil || len(ps) != len(cands) {
			t.Errorf("%s: %d operations marked by the candidates' overlay (%v), want %d", name, len(ps), err, len(cands))
		}
		// The same candidates marked in the spec itself (annotate -w): lines added only.
		written, err := gen.InsertMarkers(spec, cands)
		if err != nil {
			t.Errorf("%s: InsertMarkers: %v", name, err)
			continue
		}
		if !insertionsOnly(mustRead(t, spec), written) {
			t.Errorf("%s: InsertMarkers changed more than added lines", name)
		}
		w := filepath.Join(dir, "w-"+name)
		if err := os.WriteFile(w, written, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := gen.Generate(gen.Options{Spec: w, Package: "api"}); err != nil {
			t.Errorf("%s with the markers written in: %v", name, err)
		}
		if ps, _, err := gen.Policies(w); err != nil || len(ps) != len(cands) {
			t.Errorf("%s: %d operations marked in the spec (%v), want %d", name, len(ps), err, len(cands))
		}
		t.Logf("%s: %d operations, %d candidates marked", name, len(anns), len(cands))
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// insertionsOnly reports whether the lines of old are the lines of cur with some lines
// taken out, in order: cur only adds lines to old.
func insertionsOnly(old, cur []byte) bool {
	a, b := bytes.SplitAfter(old, []byte("\n")), bytes.SplitAfter(cur, []byte("\n"))
	i := 0
	for _, l := range b {
		if i < len(a) && bytes.Equal(a[i], l) {
			i++
		}
	}
	return i == len(a)
}
