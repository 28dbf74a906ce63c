// Package render is the fifth step of idemgen's generator (package gen): the files beside
// the base. Layer renders templates/idempotent.go.tmpl, the idempotent layer, from the
// model (package model) and oapi-codegen's operation definitions (package base), so that
// the Go names agree; Client renders templates/client.go.tmpl, the IdempotentClient, the
// same way; Spec renders the spec file (the spec embedded, and OpenAPI(), which parses it
// once). Each returns gofmt'd Go source; an operation the base has no handler for is a
// located error.
//
// It imports spec, marker, model and base (the pipeline's one-way rule:
// gen/ARCHITECTURE.md).
//
// Files: render.go (the idempotent layer and the helpers the others share), client.go,
// spec.go.
package render
