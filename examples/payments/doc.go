// Package payments is a small payments service built with idemgen: its spec
// (openapi.yaml), the generated handlers (package api), its business SQL written with sqlc
// (package db), the service itself (package service), a server (cmd/server) and a
// one-command demo (cmd/demo). See README.md.
package payments

// Regenerate the handlers (and the client) from the spec (the typed SQL: see db/doc.go):
//go:generate go tool idemgen generate -client -package api -o api openapi.yaml
