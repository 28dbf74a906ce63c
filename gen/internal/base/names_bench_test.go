package base

import (
	"fmt"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// BenchmarkResolveNames times the name rewrite alone (resolveNames: every type the base
// declares, its collisions, its enum constants) on a document of n enum values in enums
// of 10 (enumDoc), for n = 1k, 10k and 50k, and reports ns/value: flat when the rewrite
// is linear in the number of enum values. gen/internal/corpus's BenchmarkEnums times the
// whole generation against oapi-codegen alone.
//
//	go test ./gen -run '^$' -bench ResolveNames -benchtime 3x
func BenchmarkResolveNames(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("values=%d", n), func(b *testing.B) {
			codegenMu.Lock()
			defer codegenMu.Unlock()
			if err := initCodegen(baseConfig("api", RouterStdHTTP, false, false), enumDoc(1)); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				doc := enumDoc(n)
				b.StartTimer()
				if _, _, err := resolveNames(doc, RouterStdHTTP, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
		})
	}
}

// enumDoc is a document with n enum values: n/10 string enum components Enum0, Enum1, ...
// of 10 values each, every tenth sharing the value "unknown" (so that their constants are
// prefixed: Enum0Unknown), the others sharing nothing (so that a pairwise check compares
// them in full), and an object component named Enum0Unknown, which the constant takes.
func enumDoc(n int) *openapi3.T {
	schemas := openapi3.Schemas{"Enum0Unknown": openapi3.NewObjectSchema().NewRef()}
	for e := range n / 10 {
		s := openapi3.NewStringSchema()
		for v := range 10 {
			if v == 0 && e%10 == 0 {
				s.Enum = append(s.Enum, "unknown")
				continue
			}
			s.Enum = append(s.Enum, fmt.Sprintf("v%d_%d", e, v))
		}
		schemas[fmt.Sprintf("Enum%d", e)] = s.NewRef()
	}
	return &openapi3.T{
		OpenAPI:    "3.0.3",
		Info:       &openapi3.Info{Title: "enums", Version: "1"},
		Paths:      openapi3.NewPaths(),
		Components: &openapi3.Components{Schemas: schemas},
	}
}
