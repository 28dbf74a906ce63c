package cli

import (
	"fmt"
	"io"

	"github.com/idemgen/idemgen"
	"github.com/idemgen/idemgen/internal/cliflag"
)

const schemaHelp = `usage: idemgen schema [-citus]

Prints schema.sql: the idempotency_keys table, its sequence and indexes, every statement
re-runnable (IF NOT EXISTS). idem.Migrate applies the same file on start; for goose,
golang-migrate or atlas, use the versioned migrations in the repository's migrations/
folder instead.

With -citus, prints instead the statements that distribute idempotency_keys by scope on a
Citus cluster (run them on the coordinator, after schema.sql), and how to co-locate your
own tables with it.
`

func schema(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schema")
	citus := fs.Bool("citus", false, "print the statements that distribute idempotency_keys on a Citus cluster")
	rest, code, done := cliflag.Parse(fs, args, schemaHelp, stdout, stderr)
	if done {
		return code
	}
	if len(rest) > 0 {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("takes no arguments, got %q", rest[0]))
	}
	if *citus {
		io.WriteString(stdout, idemgen.CitusSchema)
		return ExitOK
	}
	io.WriteString(stdout, idemgen.Schema)
	return ExitOK
}
