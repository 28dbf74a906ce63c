// Package idemgen holds the files of the idemgen project that other packages embed.
//
// The generator lives in package gen, the runtime in package idem, the CLI in cmd/idemgen.
package idemgen

import _ "embed"

// Schema is schema.sql: the idempotency_keys table, its sequence and indexes.
// Every statement is re-runnable (IF NOT EXISTS). Printed by `idemgen schema`,
// applied by idem.Migrate.
//
//go:embed schema.sql
var Schema string

// CitusSchema is schema_citus.sql: the statements that distribute idempotency_keys by
// scope on a Citus cluster (run on the coordinator after [Schema]), with a note on
// co-locating a service's own tables by the same tenant column. Printed by
// `idemgen schema -citus`.
//
//go:embed schema_citus.sql
var CitusSchema string
