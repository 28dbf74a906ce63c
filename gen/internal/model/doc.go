// Package model is the third step of idemgen's generator (package gen): the checked
// policy of every marked operation. It checks each marker (package marker) against the
// operation it marks and resolves it into an Operation: the key (where it comes from and
// what the spec constrains of it), whether it is required, lease, retention, timeout,
// wait, isolation, store, the headers in and out of the fingerprint, the error shapes the
// spec declares. Model holds them in file order, with the operations the defaults would
// mark but cannot (a stream) and the warnings (every guess idemgen makes about a key the
// spec does not declare plainly). It holds no Go source and no oapi-codegen name: those
// are the base's and the rendering's.
//
// The model stands alone: Policies goes from a spec file to the model with no
// oapi-codegen run, for commands that need the policies only (idemgen annotate, idemgen
// policies); Check does the same for a loaded spec, adding its errors to the run's list.
//
// It imports spec and marker only (the pipeline's one-way rule: gen/ARCHITECTURE.md).
//
// Files, from the bottom up: policy.go (the model's types), key.go (the key at the place
// a marker names, and its schema), keyfind.go (the key the spec declares, found by its
// name; the warnings about keys left alone), model.go (Policies, Check: every marker
// against its operation).
package model
