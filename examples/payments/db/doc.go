// Package db is the payments example's business SQL: schema.sql, and queries.sql typed by
// sqlc (db.go, models.go, queries.sql.go), run on the protocol's transaction with
// db.New(tx).
//
// Every table is keyed by its account, the idempotency scope, and every statement a
// request runs names the account by equality: on Citus, citus.sql ([Distribute])
// distributes the tables by account co-located with idempotency_keys, and each request
// runs on one shard with a one-phase commit (service/citus_test.go checks it on a
// cluster). A team's own queries keep to the same rules: name the tenant column by
// equality, join distributed tables on it, and run what reads several shards (or is an
// INSERT ... SELECT) in the simple protocol ([SimpleProtocol]).
package db

// sqlc is optional in a service built with idemgen (business code can use idem.Tx's
// Exec, Query and QueryRow directly); this example adds it to its module with
// `go get -tool github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1`.
//go:generate go tool sqlc generate -f sqlc.yaml
