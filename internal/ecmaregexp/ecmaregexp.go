// Package ecmaregexp compiles the regular expressions of OpenAPI schemas (the pattern
// keyword) as the specification defines them: ECMA-262 syntax and semantics, lookahead,
// lookbehind and backreferences included, which Go's regexp (RE2) refuses. It is
// github.com/dlclark/regexp2 with its ECMAScript and Unicode options, behind a match
// timeout: a backtracking engine can take exponential time on a pattern such as (a+)+$,
// and the strings it matches come from requests.
//
// One engine serves the key constraints of the idem runtime (idem.KeySchema), the
// generator's check of a key pattern (package gen), and request validation
// (idemvalidate), so that a pattern means one thing everywhere.
package ecmaregexp

import (
	"errors"
	"fmt"
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
	re *regexp2.Regexp
}

// Compile compiles pattern as an ECMA-262 regular expression (ECMAScript and Unicode
// options of regexp2). The error says what in the pattern is wrong.
func Compile(pattern string) (*Regexp, error) {
	re, err := regexp2.Compile(pattern, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = MatchTimeout
	return &Regexp{re: re}, nil
}

// Match reports whether s contains a match of r. A match that runs past MatchTimeout
// returns false and an error wrapping ErrTimeout.
func (r *Regexp) Match(s string) (bool, error) {
	ok, err := r.re.MatchString(s)
	if err != nil {
		return false, fmt.Errorf("%w (%s)", ErrTimeout, MatchTimeout)
	}
	return ok, nil
}

// MatchString reports whether s contains a match of r; a match past MatchTimeout is no
// match. It is the method kin-openapi's openapi3.RegexMatcher asks for.
func (r *Regexp) MatchString(s string) bool {
	ok, _ := r.Match(s)
	return ok
}

// String returns the pattern r was compiled from.
func (r *Regexp) String() string { return r.re.String() }
