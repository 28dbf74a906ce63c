package gen

import (
	"fmt"
	"regexp"
	"strings"
)

// CandidateOverlay is an OpenAPI Overlay 1.0 document (RFC 9535 JSONPath) whose actions
// mark each of ops x-idempotent: true, one action an operation, titled title.
func CandidateOverlay(title string, ops []Annotation) []byte {
	text, _ := candidateOverlay(title, ops)
	return text
}

// candidateOverlay is CandidateOverlay, and the line each action starts on.
func candidateOverlay(title string, ops []Annotation) ([]byte, []int) {
	var b strings.Builder
	fmt.Fprintf(&b, "overlay: 1.0.0\nx-speakeasy-jsonpath: rfc9535\ninfo:\n  title: %s\n  version: 1.0.0\nactions:\n", yamlString(title))
	starts := make([]int, 0, len(ops))
	line := 7 // each action is four lines (the scalars are quoted on one line)
	for _, a := range ops {
		starts, line = append(starts, line), line+4
		fmt.Fprintf(&b, "  - target: %s\n", yamlString(jsonPath(a)))
		fmt.Fprintf(&b, "    description: %s\n", yamlString(a.Operation))
		fmt.Fprintf(&b, "    update:\n      %s: true\n", MarkerExt)
	}
	return []byte(b.String()), starts
}

// jsonPath is the RFC 9535 JSONPath of a's operation where the spec writes it (a.At; its
// path item under paths when a.At is unset): $.paths['/pets'].post,
// $.components.pathItems.Pets.post.
func jsonPath(a Annotation) string {
	at := a.At
	if at == nil {
		at = []string{"paths", a.Path, strings.ToLower(a.Method)}
	}
	var b strings.Builder
	b.WriteString("$")
	for _, tok := range at {
		if jsonPathName.MatchString(tok) {
			b.WriteString("." + tok)
		} else {
			b.WriteString("[" + jsonPathString(tok) + "]")
		}
	}
	return b.String()
}

// jsonPathName matches the names RFC 9535 takes in dot notation (ASCII ones).
var jsonPathName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jsonPathString is s as an RFC 9535 single-quoted string literal.
func jsonPathString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// yamlString is s as a YAML double-quoted scalar.
func yamlString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(s) + `"`
}
