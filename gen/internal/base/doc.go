// Package base is the fourth step of idemgen's generator (package gen): oapi-codegen's
// output, the base the idempotent layer stands on. Before oapi-codegen runs it rewrites the
// loaded document (spec.Spec.Doc, in memory) so that every valid spec gets a base that
// compiles (unique, valid Go names, the key headers, what oapi-codegen cannot generate,
// and what it cannot type, typed loosely with a warning; gen's package doc, "The base", lists the
// rules); then it runs oapi-codegen v2 as a library, once, serialised (its pkg/codegen
// keeps package-level state: codegenstate.go), and formats the result once (Format).
// With -base=external it runs no generator: CheckExternal reads the package's own
// oapi-codegen output instead.
//
// Generate gives the base's text and oapi-codegen's operation definitions, whose Go names
// the rendering (package render) uses. Target is what this step and the rendering take of
// the run's options.
//
// It imports spec, marker and model (the pipeline's one-way rule: gen/ARCHITECTURE.md).
//
// Files, from the bottom up: router.go (the routers oapi-codegen serves), codegenstate.go
// (oapi-codegen's package state), components.go (the components oapi-codegen types),
// degrade.go (what oapi-codegen cannot type, typed loosely), failures.go (what it still
// cannot generate, located; its operations), names.go (every Go name the base declares,
// collisions resolved), fieldnames.go (operations', parameters' and properties' Go
// names), enumvalues.go, extensions.go (oapi-codegen's extensions it cannot use), text.go
// (names it cannot copy into Go), refs.go ($refs it does not follow), schemas.go (one
// schema at a time), methodbodies.go, rewrite.go (the document rewritten for the base:
// prepareBase), base.go (Generate, Format), external.go (-base=external).
package base
