package cli

import (
	"fmt"
	"io"

	"github.com/idemgen/idemgen"
	"github.com/idemgen/idemgen/internal/cliflag"
)

const schemaHelp = `usage: idemgen schema

Prints schema.sql: the idempotency_keys table, its sequence and indexes, every statement
re-runnable (IF NOT EXISTS). idem.Migrate applies the same file on start; for goose,
golang-migrate or atlas, use the versioned migrations in the repository's migrations/
folder instead.
`

func schema(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schema")
	rest, code, done := cliflag.Parse(fs, args, schemaHelp, stdout, stderr)
	if done {
		return code
	}
	if len(rest) > 0 {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("takes no arguments, got %q", rest[0]))
	}
	io.WriteString(stdout, idemgen.Schema)
	return ExitOK
}
