package idemvalidate

import (
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/ecmaregexp"
)

// CompilePattern compiles a schema's pattern as an ECMA-262 regular expression, as
// OpenAPI defines pattern (lookahead, lookbehind and backreferences included, which Go's
// regexp refuses), with a match timeout of 100ms (a match that takes longer is no
// match). It is the engine the idem runtime checks key patterns with, so that a pattern
// means one thing in both.
//
// [Middleware] validates with it. A service that validates its spec document itself
// passes it too, or a pattern Go's regexp cannot compile fails the document:
//
//	err := spec.Validate(ctx, openapi3.SetRegexCompiler(idemvalidate.CompilePattern))
func CompilePattern(pattern string) (openapi3.RegexMatcher, error) {
	re, err := ecmaregexp.Compile(pattern)
	if err != nil {
		return nil, err // an untyped nil: kin-openapi checks the matcher against nil
	}
	return re, nil
}

// patternOptions makes kin-openapi match patterns with CompilePattern, in the parameters
// and in the body (openapi3filter.Options.RegexCompiler reaches the body only).
var patternOptions = []openapi3.SchemaValidationOption{openapi3.SetSchemaRegexCompiler(CompilePattern)}
