package cliflag

import (
	"flag"
	"maps"
	"slices"
	"strings"
)

// flagAliases are names other tools give to flags idemgen spells otherwise: a typed name
// close to one suggests idemgen's flag, when the flag set has it.
var flagAliases = map[string]string{"out": "o", "output": "o", "pkg": "package"}

// Closest returns the name of the flag of fs that name most likely meant, or "" (see
// [Suggest]); names other tools use for a flag of fs ("-out" for -o) count as spellings
// of it.
func Closest(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	aliases := map[string]string{}
	for alias, target := range flagAliases {
		if fs.Lookup(target) != nil {
			aliases[alias] = target
		}
	}
	return closest(name, names, aliases)
}

// Suggest returns the candidate that name most likely meant, case ignored: the closest
// within a typo or two (one for names of up to 4 letters; the first of equally close
// ones), else the only candidate that name begins ("-c" for -check, "gen" for
// generate); or "" when none is close or name begins several.
func Suggest(name string, candidates []string) string {
	return closest(name, candidates, nil)
}

// closest is Suggest with aliases: other spellings of candidates, checked for typos only.
func closest(name string, candidates []string, aliases map[string]string) string {
	name = strings.ToLower(name)
	limit := 1
	if len(name) > 4 {
		limit = 2
	}
	best, bestDist := "", limit+1
	consider := func(spelling, candidate string) {
		if d := Distance(name, strings.ToLower(spelling)); d < bestDist && d < len(name) {
			best, bestDist = candidate, d
		}
	}
	for _, c := range candidates {
		consider(c, c)
	}
	for _, alias := range slices.Sorted(maps.Keys(aliases)) {
		consider(alias, aliases[alias])
	}
	if best != "" {
		return best
	}
	return onlyPrefixed(name, candidates)
}

// onlyPrefixed returns the one candidate that begins with prefix (lowercase), or "".
func onlyPrefixed(prefix string, candidates []string) string {
	match := ""
	for _, c := range candidates {
		if prefix == "" || !strings.HasPrefix(strings.ToLower(c), prefix) {
			continue
		}
		if match != "" {
			return ""
		}
		match = c
	}
	return match
}

// Distance is the optimal string alignment distance between a and b, in bytes, case
// kept: insertions, deletions, substitutions and transpositions of adjacent bytes each
// count one ("x-idempotnet" is 1 from "x-idempotent"). [Suggest] ranks with it; callers
// that want a stricter threshold than Suggest's use it directly.
func Distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
