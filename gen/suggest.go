package gen

import "strings"

// closest returns the candidate nearest to name, case ignored, when it is within a typo or
// two: an edit distance of at most a quarter of name's length, and at least 1 ("isolaton"
// gives "isolation", "leese" gives "lease"). Ties go to the earlier candidate. "" when
// none is that close.
func closest(name string, candidates []string) string {
	name = strings.ToLower(name)
	best, bestDist := "", max(1, len(name)/4)+1
	for _, c := range candidates {
		if d := editDistance(name, strings.ToLower(c)); d < bestDist && d < len(name) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b: insertions,
// deletions, substitutions and transpositions of adjacent bytes each count one. (The same
// as cmd/idemgen's for flags; no dependency of the module exports one.)
func editDistance(a, b string) int {
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
