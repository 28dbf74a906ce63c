package corpus

import (
	"fmt"
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

// BenchmarkGenerate compares, in one run, idemgen generating each spec of ../shared/specs
// with all its POSTs marked (base and idempotent layer, formatted) against oapi-codegen
// alone generating the same spec unmarked as its command does (kin-openapi load, models +
// std-http + strict, formatted), one sub-benchmark per spec that oapi-codegen alone
// generates to the end (the others are skipped, with oapi-codegen's error). Each iteration
// runs both, one after the other, so that a busy machine slows both alike. Each reports:
//
//   - oapi-codegen-s/op, idemgen-s/op: wall-clock seconds per run;
//   - ratio: idemgen/oapi-codegen in wall time (the goal: at most 1.2), and cpu-ratio, the
//     same in CPU time (user + system, all threads), steadier on a shared machine;
//   - oapi-codegen-MB/op, idemgen-MB/op: megabytes allocated per run;
//   - oapi-codegen-maxrss-MB, idemgen-maxrss-MB, rss-ratio: the peak resident memory of
//     one run in a process of its own (the median of rssRuns such processes per
//     generator, interleaved); the goal: idemgen no worse than oapi-codegen alone;
//   - oapi-codegen-live-MB, idemgen-live-MB, live-ratio: the peak live heap of one run,
//     the steadier measure beside it (the median of liveRuns processes with frequent
//     garbage collection cycles; memory_test.go says how both are measured).
//
// The README's performance notes give the numbers:
//
//	go test ./gen/internal/corpus -run '^$' -bench Generate -benchtime 3x
func BenchmarkGenerate(b *testing.B) {
	specs := findSpecs(b)
	for _, spec := range specs {
		name := filepath.Base(spec)
		if _, pinned := invalid[name]; pinned {
			continue
		}
		b.Run(name, func(b *testing.B) {
			if err := oapiCodegenAlone(spec); err != nil {
				b.Skipf("oapi-codegen alone does not generate %s: %v", name, err)
			}
			marked := filepath.Join(b.TempDir(), name)
			if err := os.WriteFile(marked, withDefaults(b, spec), 0o644); err != nil {
				b.Fatal(err)
			}
			compare(b, spec, marked)
		})
	}
}

// BenchmarkEnums generates a spec holding n enum values (enumSpec), for n = 1k, 10k and
// 50k, with both generators interleaved as in BenchmarkGenerate. Besides its metrics it
// reports oapi-codegen-µs/value and idemgen-µs/value: each generator's time per enum
// value, flat from 1k to 50k when generation is linear in the number of enum values.
// (gen's BenchmarkResolveNames times the name rewrite alone on many small enums.)
//
//	go test ./gen/internal/corpus -run '^$' -bench Enums -benchtime 3x
func BenchmarkEnums(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("values=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			plain, marked := filepath.Join(dir, "enums.yaml"), filepath.Join(dir, "enums-marked.yaml")
			spec := enumSpec(n)
			if err := os.WriteFile(plain, spec, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(marked, append(spec, markAll...), 0o644); err != nil {
				b.Fatal(err)
			}
			alone, idemgen := compare(b, plain, marked)
			perValue := 1e6 / float64(b.N) / float64(n)
			b.ReportMetric(alone.wall.Seconds()*perValue, "oapi-codegen-µs/value")
			b.ReportMetric(idemgen.wall.Seconds()*perValue, "idemgen-µs/value")
		})
	}
}

// enumSpec is an OpenAPI document with n enum values: n/1000 string enum components of
// 1000 values (Enum0, Enum1, ...: Enum0 and Enum1 share the value "unknown", so that
// their constants are prefixed, and Enum0 has a value named like a component, Widget; the
// others share nothing, so that every pair of them is compared in full), an object that
// refers to every one, and one POST. oapi-codegen compares every pair of enums itself:
// enums of 1000 values keep its pairs few.
func enumSpec(n int) []byte {
	const size = 1000
	var s []byte
	s = append(s, `openapi: "3.0.3"
info: {title: enums, version: "1"}
paths:
  /widgets:
    post:
      operationId: createWidget
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Widget'}
      responses:
        '201': {description: created}
components:
  schemas:
    Widget:
      type: object
      properties:
`...)
	enums := n / size
	for e := range enums {
		s = fmt.Appendf(s, "        e%d: {$ref: '#/components/schemas/Enum%d'}\n", e, e)
	}
	for e := range enums {
		s = fmt.Appendf(s, "    Enum%d:\n      type: string\n      enum: [", e)
		for v := range size {
			switch {
			case v == 0 && e == 0:
				s = append(s, "Widget"...)
			case v == 1 && e < 2:
				s = append(s, "unknown"...)
			default:
				s = fmt.Appendf(s, "v%d_%d", e, v)
			}
			if v < size-1 {
				s = append(s, ", "...)
			}
		}
		s = append(s, "]\n"...)
	}
	return s
}

// compare runs, in each iteration, oapi-codegen alone on plain and idemgen on marked, and
// reports BenchmarkGenerate's metrics; it returns the two costs.
func compare(b *testing.B, plain, marked string) (alone, idemgen cost) {
	settle := settler(b)
	for b.Loop() {
		alone.add(func() {
			if err := oapiCodegenAlone(plain); err != nil {
				b.Fatal(err)
			}
		})
		settle()
		idemgen.add(func() {
			if err := generate(marked); err != nil {
				b.Fatal(err)
			}
		})
	}
	n := float64(b.N)
	b.ReportMetric(alone.wall.Seconds()/n, "oapi-codegen-s/op")
	b.ReportMetric(idemgen.wall.Seconds()/n, "idemgen-s/op")
	b.ReportMetric(idemgen.wall.Seconds()/alone.wall.Seconds(), "ratio")
	b.ReportMetric(idemgen.cpu.Seconds()/alone.cpu.Seconds(), "cpu-ratio")
	b.ReportMetric(float64(alone.alloc)/n/1e6, "oapi-codegen-MB/op")
	b.ReportMetric(float64(idemgen.alloc)/n/1e6, "idemgen-MB/op")
	pa, pi := measurePeaks(b, plain, marked)
	b.ReportMetric(pa.rss/1e6, "oapi-codegen-maxrss-MB")
	b.ReportMetric(pi.rss/1e6, "idemgen-maxrss-MB")
	b.ReportMetric(pi.rss/pa.rss, "rss-ratio")
	b.ReportMetric(pa.live/1e6, "oapi-codegen-live-MB")
	b.ReportMetric(pi.live/1e6, "idemgen-live-MB")
	b.ReportMetric(pi.live/pa.live, "live-ratio")
	return alone, idemgen
}

// cost is the wall-clock and CPU time (the process's, all threads: user + system) and the
// bytes allocated of the runs added. Each run starts after a garbage collection, so that
// neither pays for the other's garbage.
type cost struct {
	wall, cpu time.Duration
	alloc     uint64
}

func (c *cost) add(run func()) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, start := cpuTime(), time.Now()
	run()
	c.wall += time.Since(start)
	c.cpu += cpuTime() - cpu0
	runtime.ReadMemStats(&m1)
	c.alloc += m1.TotalAlloc - m0.TotalAlloc
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settler returns a function that runs idemgen on a small spec, untimed, so that
// oapi-codegen's package state is idemgen's again after oapi-codegen alone's run: as in
// the command's own process, where nothing else runs oapi-codegen, the timed run then sets
// the state its names need without a full run of oapi-codegen on an empty document
// (gen/codegenstate.go).
func settler(b *testing.B) func() {
	b.Helper()
	spec := filepath.Join(b.TempDir(), "settle.yaml")
	if err := os.WriteFile(spec, []byte(settleYAML), 0o644); err != nil {
		b.Fatal(err)
	}
	return func() {
		if err := generate(spec); err != nil {
			b.Fatal(err)
		}
	}
}

const settleYAML = `openapi: 3.0.3
info: {title: settle, version: "1"}
paths:
  /things:
    post:
      operationId: createThing
      x-idempotent: true
      responses:
        "201": {description: created}
`

// generate is idemgen's run: gen.Generate of the marked spec, in memory.
func generate(spec string) error {
	_, err := gen.Generate(gen.Options{Spec: spec, Package: "api"})
	return err
}

// oapiCodegenAlone is what `oapi-codegen -generate types,std-http-server,strict-server`
// does: load the spec, generate, format. A panic of oapi-codegen is an error.
func oapiCodegenAlone(path string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	abs, _ := filepath.Abs(path)
	doc, err := loader.LoadFromDataWithPath(data, &url.URL{Path: abs})
	if err != nil {
		return err
	}
	_, err = codegen.Generate(doc, codegen.Configuration{
		PackageName: "api",
		Generate:    codegen.GenerateOptions{Models: true, StdHTTPServer: true, Strict: true},
	})
	return err
}
