// Package spec is the first step of idemgen's generator (package gen): the spec as a
// located document. It reads the OpenAPI file twice over, as a node tree for positions
// (Source: JSON through encoding/json's tokenizer, YAML through go.yaml.in/yaml/v4) and
// as kin-openapi's document (Spec.Doc: external $refs to local files only; a bundler's
// content $refs resolved first, contentref.go), after applying the OpenAPI Overlay
// documents given (overlay.go: what an overlay wrote is located in the overlay file), and
// runs the checks of the document itself: the OpenAPI version, duplicate keys, local $refs, path templates against their
// path parameters, operation ids, parameters (declared twice, an unknown in, no schema nor
// content) and response keys, content $refs.
//
// Its errors are the ones every later step reports: Pos, Error and ErrorList (FILE:LINE:COL
// messages, all of a run at once; gen re-exports them). It also holds the walks of the
// document the later steps share (ForEachOperation, ForEachSchema, WalkSchemas with the
// places, OperationParams, IsJSON, SortedKeys), and Source.PosOf, the position of a place
// given by its keys.
//
// The pipeline is spec → marker → model → base → render → genfs, with gen on top: each
// package imports only the ones before it (gen/ARCHITECTURE.md). spec imports none of
// them.
//
// Files, from the bottom up: errors.go (positions, located errors), walk.go (document
// walks, media types), source.go (the node tree, positions, JSON pointers), loader.go
// (kin-openapi's loader as idemgen configures it), jsondoc.go (a JSON document decoded
// from the node tree instead of parsed again), contentref.go, check.go (the document's
// own checks), overlay.go (ApplyOverlays: overlays on the node tree, with the
// overlay's positions), load.go (Load: all of it, in order).
package spec
