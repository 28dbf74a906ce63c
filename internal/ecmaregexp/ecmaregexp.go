// Package ecmaregexp compiles the regular expressions of OpenAPI schemas (the pattern
// keyword) as the specification defines them: ECMA-262 syntax and semantics, lookahead,
// lookbehind and backreferences included, which Go's regexp (RE2) refuses. It is
// github.com/dlclark/regexp2 with its ECMAScript and Unicode options, behind a match
// timeout: a backtracking engine can take exponential time on a pattern such as (a+)+$,
// and the strings it matches come from requests.
//
// A pattern that Go's regexp compiles and that uses none of the constructs whose meaning
// differs between the two (an unescaped . outside a class, \s, \S) is matched by Go's
// regexp instead: the same matches, in linear time, with no timeout to misfire. Most
// patterns of real specs are such ([A-Z]{3}, [a-z0-9_-]+); the others (lookarounds,
// backreferences, \uXXXX, . and \s with their ECMA-262 meaning) go to regexp2.
//
// One engine serves the key constraints of the idem runtime (idem.KeySchema), the
// generator's check of a key pattern (package gen), and request validation
// (idemvalidate), so that a pattern means one thing everywhere.
package ecmaregexp

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/dlclark/regexp2"
)

// MatchTimeout bounds one match: a match that runs longer fails (ErrTimeout). A key is at
// most 255 bytes and a linear pattern matches it in microseconds; only catastrophic
// backtracking comes near it.
const MatchTimeout = 100 * time.Millisecond

// ErrTimeout is wrapped by the error of a match that ran past MatchTimeout.
var ErrTimeout = errors.New("the pattern took longer than the match timeout")

// Regexp is a compiled ECMA-262 pattern, unanchored as in JSON Schema (write ^...$ to
// anchor). It is safe for concurrent use.
type Regexp struct {
	pattern string
	re2     *regexp.Regexp  // when the pattern means the same to Go's regexp
	re      *regexp2.Regexp // otherwise
}

// Compile compiles pattern as an ECMA-262 regular expression (ECMAScript and Unicode
// options of regexp2). The error says what in the pattern is wrong.
func Compile(pattern string) (*Regexp, error) {
	re, err := regexp2.Compile(pattern, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		return nil, err
	}
	if sameInRE2(pattern) {
		if re2, err := regexp.Compile(pattern); err == nil {
			return &Regexp{pattern: pattern, re2: re2}, nil
		}
	}
	re.MatchTimeout = MatchTimeout
	return &Regexp{pattern: pattern, re: re}, nil
}

// sameInRE2 reports whether pattern uses none of the constructs that Go's regexp reads
// otherwise than ECMA-262 does when both compile it: . outside a character class (RE2's
// excludes only \n; ECMA-262's also \r, U+2028 and U+2029), and \s, \S (RE2's are ASCII
// white space; ECMA-262's are Unicode's).
func sameInRE2(pattern string) bool {
	inClass := false
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\':
			if i+1 < len(pattern) && (pattern[i+1] == 's' || pattern[i+1] == 'S') {
				return false
			}
			i++ // the escaped character
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case c == '.' && !inClass:
			return false
		}
	}
	return true
}

// Match reports whether s contains a match of r. A match that runs past MatchTimeout
// returns false and an error wrapping ErrTimeout.
//
// regexp2 checks its timeout against a coarse clock that a background goroutine advances
// every 100ms; when that goroutine was descheduled (a loaded machine), the clock jumps
// forward by more than the timeout in one step, and a match that took microseconds reports
// a timeout ("EUR" failed ^[A-Z]{3}$ under load). So a timeout is believed only when the
// match really ran that long by the wall clock; otherwise the match is run again (a few
// times at most: each run is as short as the first).
func (r *Regexp) Match(s string) (bool, error) {
	if r.re2 != nil {
		return r.re2.MatchString(s), nil
	}
	const tries = 4
	for try := 1; ; try++ {
		start := time.Now()
		ok, err := r.re.MatchString(s)
		if err == nil {
			return ok, nil
		}
		if time.Since(start) >= MatchTimeout || try == tries {
			return false, fmt.Errorf("%w (%s)", ErrTimeout, MatchTimeout)
		}
	}
}

func (r *Regexp) MatchString(s string) bool {
	ok, _ := r.Match(s)
	return ok
}

// String returns the pattern r was compiled from.
func (r *Regexp) String() string { return r.pattern }
