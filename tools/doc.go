// Package tools is a module of its own that pins the development tools of idemgen
// (sqlc), so the module a service requires does not carry them. From the repository root:
//
//	(cd tools && go tool sqlc generate -f ../sqlc.yaml)
package tools
