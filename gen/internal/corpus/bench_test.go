package corpus

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/gen"
)

// benchSpec is the largest corpus spec that oapi-codegen alone generates to the end
// (asana.yaml and openai.yaml are larger, but oapi-codegen refuses them).
const benchSpec = "corpus/svix.json"

// BenchmarkGenerate compares, in one run, idemgen generating svix.json with all its POSTs
// marked (base and idempotent layer, formatted) against oapi-codegen alone generating the
// same spec unmarked as its command does (kin-openapi load, models + std-http + strict,
// formatted). Each iteration runs both, one after the other, so that a busy machine slows
// both alike; it reports each one's seconds and their ratio (idemgen/oapi-codegen). The
// README's performance notes give the numbers:
//
//	go test ./gen/internal/corpus -run '^$' -bench Generate -benchtime 5x -count 3
func BenchmarkGenerate(b *testing.B) {
	spec := filepath.Join(specsDir, benchSpec)
	data, err := os.ReadFile(spec)
	if os.IsNotExist(err) {
		b.Skipf("%s: the corpus lives in ../shared/specs beside the repository", spec)
	}
	if err != nil {
		b.Fatal(err)
	}
	marked := filepath.Join(b.TempDir(), filepath.Base(spec))
	if err := os.WriteFile(marked, withDefaults(b, spec), 0o644); err != nil {
		b.Fatal(err)
	}
	var alone, idemgen time.Duration
	for b.Loop() {
		start := time.Now()
		oapiCodegenAlone(b, spec, data)
		mid := time.Now()
		if _, err := gen.Generate(gen.Options{Spec: marked, Package: "api"}); err != nil {
			b.Fatal(err)
		}
		alone, idemgen = alone+mid.Sub(start), idemgen+time.Since(mid)
	}
	n := float64(b.N)
	b.ReportMetric(alone.Seconds()/n, "oapi-codegen-s/op")
	b.ReportMetric(idemgen.Seconds()/n, "idemgen-s/op")
	b.ReportMetric(idemgen.Seconds()/alone.Seconds(), "ratio")
}

// oapiCodegenAlone is what `oapi-codegen -generate types,std-http-server,strict-server`
// does: load the spec, generate, format.
func oapiCodegenAlone(b *testing.B, path string, data []byte) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	abs, _ := filepath.Abs(path)
	doc, err := loader.LoadFromDataWithPath(data, &url.URL{Path: abs})
	if err != nil {
		b.Fatal(err)
	}
	_, err = codegen.Generate(doc, codegen.Configuration{
		PackageName: "api",
		Generate:    codegen.GenerateOptions{Models: true, StdHTTPServer: true, Strict: true},
	})
	if err != nil {
		b.Fatal(err)
	}
}
