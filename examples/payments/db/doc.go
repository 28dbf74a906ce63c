// Package db is the payments example's business SQL: schema.sql, and queries.sql typed by
// sqlc (db.go, models.go, queries.sql.go), run on the protocol's transaction with
// db.New(tx).
package db

// sqlc is optional in a service built with idemgen (business code can use idem.Tx's
// Exec, Query and QueryRow directly); this example adds it to its module with
// `go get -tool github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1`.
//go:generate go tool sqlc generate -f sqlc.yaml
