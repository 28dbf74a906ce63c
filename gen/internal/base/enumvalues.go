package base

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// enumValues leaves out of an enum's values the ones oapi-codegen would write as
// constants its Go type cannot hold, and the repeats of a value: an integer enum's 2.5 or
// 3000000000 in an int32 ("constant truncated", "overflows"), a string in a number enum
// ("is not a number or boolean literal"), true in an integer one, a string value with a
// control character (oapi-codegen refuses the spec), a value listed twice beside
// x-enum-varnames (two constants of one value: "duplicate case" in Valid). The values
// left are the enum's constants; with none left the schema is its plain type. The spec
// is not changed: requests are still validated against the enum as written. It reports
// what it left out (nil when nothing); null is enumWithoutNull's.
func enumValues(s *openapi3.Schema) *Degradation {
	if len(s.Enum) == 0 || s.Extensions["x-go-type"] != nil {
		return nil
	}
	holds := holder(s)
	if holds == nil {
		return nil
	}
	names := enumNames(s)
	if names == nil && all(s.Enum, holds) {
		return nil // the common case: nothing to leave out, no names to keep apart
	}
	var kept, names2, dropped []any
	seen := map[string]bool{}
	repeated := false
	for i, v := range s.Enum {
		text := fmt.Sprintf("%v", v)
		switch {
		case v != nil && !holds(v): // null is enumWithoutNull's
			dropped = append(dropped, v)
			continue
		case seen[text]:
			repeated = true
			continue
		}
		seen[text] = true
		kept = append(kept, v)
		if i < len(names) {
			names2 = append(names2, names[i])
		}
	}
	if len(dropped) == 0 && (!repeated || names == nil) {
		return nil
	}
	s.Enum = kept
	if len(kept) == 0 {
		s.Enum = nil
	}
	if names != nil {
		for _, ext := range []string{"x-enum-varnames", "x-enumNames"} {
			if s.Extensions[ext] != nil {
				s.Extensions[ext] = names2
			}
		}
	}
	if len(dropped) == 0 {
		return &Degradation{Why: "the enum lists a value twice, and its x-enum-varnames name two constants of it", Did: "declares one constant per value"}
	}
	texts := make([]string, len(dropped))
	for i, v := range dropped {
		texts[i] = fmt.Sprintf("%q", fmt.Sprintf("%v", v))
	}
	return &Degradation{
		Why: fmt.Sprintf("oapi-codegen cannot declare the enum value(s) %s as constants of the enum's Go type", strings.Join(texts, ", ")),
		Did: "leaves them out of its constants (validation still reads the enum as written)",
	}
}

// enumNames are the names x-enum-varnames (or x-enumNames) gives an enum's values, or nil.
func enumNames(s *openapi3.Schema) []any {
	for _, ext := range []string{"x-enum-varnames", "x-enumNames"} {
		if names, ok := s.Extensions[ext].([]any); ok {
			return names
		}
	}
	return nil
}

// holder returns the test of a value that an enum constant of the Go type of s can hold,
// or nil when every value can (or the type is not a string, number or boolean one).
// oapi-codegen's own type is asked only for a value that a plain integer might not hold.
func holder(s *openapi3.Schema) func(any) bool {
	switch {
	case s.Type.Is(openapi3.TypeString):
		return func(v any) bool {
			str, ok := v.(string)
			return !ok || !strings.ContainsFunc(str, unicode.IsControl)
		}
	case s.Type.Is(openapi3.TypeInteger):
		if all(s.Enum, smallInteger) && (s.Format == "" || s.Format == "int32" || s.Format == "int64") {
			return nil
		}
	case s.Type.Is(openapi3.TypeNumber):
		if all(s.Enum, isFloat) && s.Format != "float" {
			return nil
		}
	case s.Type.Is(openapi3.TypeBoolean):
		if all(s.Enum, isBool) {
			return nil
		}
	default:
		return nil
	}
	plain := *s
	plain.Enum, plain.Extensions = nil, nil
	gs, err := codegen.GenerateGoSchema(&openapi3.SchemaRef{Value: &plain}, []string{"Enum"})
	if err != nil {
		return nil
	}
	switch gs.GoType {
	case "int", "int64":
		return integer(math.MinInt64, below(math.MaxInt64))
	case "int32":
		return integer(math.MinInt32, math.MaxInt32)
	case "int16":
		return integer(math.MinInt16, math.MaxInt16)
	case "int8":
		return integer(math.MinInt8, math.MaxInt8)
	case "uint", "uint64":
		return integer(0, below(math.MaxUint64))
	case "uint32":
		return integer(0, math.MaxUint32)
	case "uint16":
		return integer(0, math.MaxUint16)
	case "uint8":
		return integer(0, math.MaxUint8)
	case "float64":
		return isFloat
	case "float32":
		return func(v any) bool { f, ok := v.(float64); return ok && math.Abs(f) <= math.MaxFloat32 }
	case "bool":
		return isBool
	}
	return nil
}

// all reports whether every value but null passes test.
func all(values []any, test func(any) bool) bool {
	return !slices.ContainsFunc(values, func(v any) bool { return v != nil && !test(v) })
}

func isFloat(v any) bool { _, ok := v.(float64); return ok }

func isBool(v any) bool { _, ok := v.(bool); return ok }

// smallInteger reports a number any Go integer type but the unsigned and 8- and 16-bit
// ones holds.
func smallInteger(v any) bool {
	f, ok := v.(float64)
	return ok && f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32
}

// below is the largest float64 under the 64-bit bound hi (which float64 rounds up to a
// power of two no such integer holds).
func below(hi float64) float64 { return math.Nextafter(hi, 0) }

// integer tests for a whole number in [lo, hi]: what an integer constant holds.
func integer(lo, hi float64) func(any) bool {
	return func(v any) bool {
		f, ok := v.(float64)
		return ok && f == math.Trunc(f) && f >= lo && f <= hi
	}
}
