// Package marker is the second step of idemgen's generator (package gen): the
// x-idempotent markers as written. It reads every operation's marker and the document's
// x-idempotent-defaults from the spec's node tree (spec.Source), with the position of each
// field, and checks them on their own: the grammar (unknown fields, types, durations,
// isolation levels, header names), misspelled extension names (x-idempotant), markers
// where none may be (a path item, an operation of a $ref'd path item, a safe method).
//
// ReadMarkers gives one OpMarker per marked operation, the defaults applied (Marker.over):
// the model step (package model) checks each against the operation it marks. Errors go
// into the run's spec.ErrorList.
//
// It imports spec only (the pipeline's one-way rule: gen/ARCHITECTURE.md).
//
// Files: marker.go (the grammar and its reader), spelling.go (extension names, and
// markers in the wrong place), which uses it.
package marker
