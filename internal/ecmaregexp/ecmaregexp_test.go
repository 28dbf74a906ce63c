package ecmaregexp

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	// \s keeps the pattern on regexp2 (a backtracking engine); (a+)+ alone goes to Go's
	// regexp, linear, and needs no timeout.
	if ok, err := MustCompileTest(t, `^(a+)+$`).Match(strings.Repeat("a", 64) + "!"); ok || err != nil {
		t.Errorf("^(a+)+$ on Go's regexp: %v, %v; want false, nil", ok, err)
	}
	re, err := Compile(`^(a+)+\s$`)
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

// TestNoSpuriousTimeoutUnderLoad: with every core busy, regexp2's coarse timeout clock
// jumps and reported timeouts for matches of microseconds (44 of them in 5s on 2 cores
// before Match checked the wall clock): a key or a body field the spec allows was then
// refused with 400.
func TestNoSpuriousTimeoutUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("loads every core for 2s")
	}
	re, err := Compile(`^[A-Z]{3}$`)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var spin sync.WaitGroup
	for range runtime.NumCPU() * 8 {
		spin.Go(func() {
			for x := 0; ; x++ {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 1_000_000 {
					x += i
				}
			}
		})
	}
	var wrong atomic.Int64
	var match sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for range 16 {
		match.Go(func() {
			for time.Now().Before(deadline) {
				if ok, err := re.Match("EUR"); !ok || err != nil {
					wrong.Add(1)
				}
			}
		})
	}
	match.Wait()
	close(stop)
	spin.Wait()
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d matches of \"EUR\" against ^[A-Z]{3}$ failed under load", n)
	}
}

func MustCompileTest(t *testing.T, pattern string) *Regexp {
	t.Helper()
	re, err := Compile(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// TestEngineChoice: the patterns Go's regexp reads as ECMA-262 does go to it, the others
// to regexp2.
func TestEngineChoice(t *testing.T) {
	for pattern, re2 := range map[string]bool{
		`^[A-Z]{3}$`:       true,
		`^[a-z0-9_.-]+$`:   true, // . in a class is a literal in both
		`^a\.b$`:           true, // so is an escaped one
		`^.+$`:             false,
		`^\S+$`:            false,
		`^[\s]+$`:          false,
		`^(?!\s)(.*)(\S)$`: false,
		`^\u00e9$`:         false, // RE2 has no \uXXXX
	} {
		if got := MustCompileTest(t, pattern).re2 != nil; got != re2 {
			t.Errorf("%s: on Go's regexp %v, want %v", pattern, got, re2)
		}
	}
}
