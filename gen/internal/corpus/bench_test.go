package corpus

import (
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
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
// both alike; it reports each one's wall-clock seconds, their ratio (idemgen/oapi-codegen)
// and the ratio of their CPU time, steadier on a shared machine. The README's
// performance notes give the numbers:
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
	var alone, idemgen cost
	for b.Loop() {
		alone.add(func() { oapiCodegenAlone(b, spec, data) })
		idemgen.add(func() {
			if _, err := gen.Generate(gen.Options{Spec: marked, Package: "api"}); err != nil {
				b.Fatal(err)
			}
		})
	}
	n := float64(b.N)
	b.ReportMetric(alone.wall.Seconds()/n, "oapi-codegen-s/op")
	b.ReportMetric(idemgen.wall.Seconds()/n, "idemgen-s/op")
	b.ReportMetric(idemgen.wall.Seconds()/alone.wall.Seconds(), "ratio")
	b.ReportMetric(idemgen.cpu.Seconds()/alone.cpu.Seconds(), "cpu-ratio")
}

// cost is the wall-clock and CPU time (the process's, all threads: user + system) of the
// runs added. Each run starts after a garbage collection, so that neither pays for the
// other's garbage.
type cost struct{ wall, cpu time.Duration }

func (c *cost) add(run func()) {
	runtime.GC()
	cpu0, start := cpuTime(), time.Now()
	run()
	c.wall += time.Since(start)
	c.cpu += cpuTime() - cpu0
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
