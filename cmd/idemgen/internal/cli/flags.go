package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/idemgen/idemgen/internal/cliflag"
)

// newFlagSet returns the flag set of subcommand name; cliflag.Parse parses it.
func newFlagSet(name string) *flag.FlagSet {
	return cliflag.NewFlagSet("idemgen " + name)
}

// specHint is generate's hint for an unknown flag: other generators take the spec file
// as a flag (-i, -spec, ...), idemgen as an argument.
func specHint(name string) string {
	switch strings.ToLower(name) {
	case "spec", "i", "input", "in", "file", "f":
		return "the spec file is an argument: idemgen generate [flags] SPEC"
	}
	return ""
}

// usageErrors prints the usage errors of command (its full name, "idemgen generate"),
// one a line, the last one saying where help is (cliflag.UsageLine), and returns
// ExitUsage.
func usageErrors(stderr io.Writer, command string, problems ...string) int {
	last := len(problems) - 1
	for _, p := range problems[:last] {
		fmt.Fprintf(stderr, "%s: %s\n", command, p)
	}
	fmt.Fprintln(stderr, cliflag.UsageLine(command, problems[last]))
	return ExitUsage
}

// listFlag is a flag given any number of times, its values in order (-overlay A -overlay B).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// overlayUsage is the -overlay flag's usage, for every command that reads a spec.
const overlayUsage = "OpenAPI Overlay `FILE` (1.0 or 1.1) applied to the spec first; repeat it to apply several,\nin order (what an overlay writes is located in its file)"
