package ecmaregexp

import (
	"errors"
	"strings"
	"testing"
)

// TestECMA: patterns RE2 refuses compile, and mean what ECMA-262 says; matches are
// unanchored unless the pattern anchors them.
func TestECMA(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{`^(?!\s)(.*)(\S)$`, "key-1", true},   // the banking standards' key pattern
		{`^(?!\s)(.*)(\S)$`, " key-1", false}, // leading space refused by the lookahead
		{`^(?!\s)(.*)(\S)$`, "key-1 ", false}, // trailing space refused by \S$
		{`(?<=ab)c`, "abc", true},             // lookbehind
		{`^(a)\1$`, "aa", true},               // backreference
		{`[0-9]`, "abc1", true},               // unanchored
		{`^[a-z]+$`, "abc-1", false},
		{`^\u00e9$`, "é", true},       // \uXXXX
		{`^[a-z]+$`, "abc\n", false},  // $ is the end of input (.NET's matches before a final \n)
		{`^.$`, "\r", false},          // . excludes line terminators
		{`(?i)^[a-z]+$`, "ABC", true}, // inline flags, which RE2 took, still compile
	} {
		re, err := Compile(c.pattern)
		if err != nil {
			t.Fatalf("Compile(%q): %v", c.pattern, err)
		}
		if got, err := re.Match(c.s); got != c.want || err != nil {
			t.Errorf("%q.Match(%q) = %v, %v; want %v", c.pattern, c.s, got, err, c.want)
		}
	}
	if _, err := Compile(`(unclosed`); err == nil {
		t.Error("Compile of an unclosed group: no error")
	}
}

// TestTimeout: catastrophic backtracking stops at MatchTimeout with ErrTimeout, and
// MatchString counts it as no match.
func TestTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a match until its timeout")
	}
	re, err := Compile(`^(a+)+$`)
	if err != nil {
		t.Fatal(err)
	}
	evil := strings.Repeat("a", 64) + "!"
	if ok, err := re.Match(evil); ok || !errors.Is(err, ErrTimeout) {
		t.Errorf("Match = %v, %v; want false, ErrTimeout", ok, err)
	}
	if re.MatchString(evil) {
		t.Error("MatchString past the timeout = true")
	}
}
