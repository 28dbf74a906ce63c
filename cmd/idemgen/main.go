// Command idemgen generates idempotent Go HTTP handlers from an OpenAPI spec whose
// operations carry x-idempotent markers. Run `idemgen help` for usage.
package main

import (
	"os"

	"github.com/idemgen/idemgen/cmd/idemgen/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
