package base

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// pairwisePrefix is oapi-codegen v2.8.2's GenerateEnums conflict resolution as it is
// written (every pair of enums compared until nothing changes), kept as the reference
// prefixConflicting must agree with.
func pairwisePrefix(enums []*enum) {
	for changed := true; changed; {
		changed = false
		for i, a := range enums {
			for _, b := range enums[i+1:] {
				if a.prefix && b.prefix {
					continue
				}
				if conflict(a, b) {
					changed = changed || !a.prefix || !b.prefix
					a.prefix, b.prefix = true, true
				}
			}
		}
	}
}

func conflict(a, b *enum) bool {
	for k := range a.values {
		if _, ok := b.values[k]; ok {
			return true
		}
	}
	bc := b.constants()
	return slices.ContainsFunc(a.constants(), func(c string) bool { return slices.Contains(bc, c) })
}

// TestPrefixConflicting: on random enums whose names and values are drawn from a few
// short pieces (so that values meet each other and prefixed constants: "A" + "b" is a
// value "Ab" of another enum), the linear resolution prefixes exactly the enums the
// pairwise one does, in every order.
func TestPrefixConflicting(t *testing.T) {
	pieces := []string{"A", "b", "Ab", "AbB", "B", "bB", "Bb", "c", "AB", "ABb"}
	rng := rand.New(rand.NewPCG(1, 2))
	prefixed := 0
	for n := range 5000 {
		var ref, lin []*enum
		for i := range 1 + rng.IntN(6) {
			name := pieces[rng.IntN(len(pieces))]
			if rng.IntN(3) == 0 {
				name += fmt.Sprint(i) // some enums meet none
			}
			values := map[string]string{}
			for range 1 + rng.IntN(3) {
				v := pieces[rng.IntN(len(pieces))]
				values[v] = v
			}
			ref = append(ref, &enum{name: name, values: values})
			lin = append(lin, &enum{name: name, values: values})
		}
		pairwisePrefix(ref)
		prefixConflicting(lin)
		for i := range ref {
			if ref[i].prefix != lin[i].prefix {
				t.Fatalf("case %d: enum %d (%s %v): pairwise prefix %v, linear %v", n, i, ref[i].name, ref[i].values, ref[i].prefix, lin[i].prefix)
			}
			if ref[i].prefix {
				prefixed++
			}
		}
	}
	if prefixed == 0 {
		t.Fatal("no enum was prefixed: the cases exercise nothing")
	}
}

// The constants are oapi-codegen's: UppercaseFirstCharacter of the value name after the
// type name.
func TestEnumConstantsSpelling(t *testing.T) {
	e := &enum{name: "Color", values: map[string]string{"red": "red"}, prefix: true}
	if got := e.constants(); !slices.Equal(got, []string{"Color" + codegen.UppercaseFirstCharacter("red")}) || got[0] != "ColorRed" {
		t.Errorf("constants = %v", got)
	}
}
