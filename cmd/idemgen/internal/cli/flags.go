package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet returns a flag set for subcommand name whose parse errors go to stderr and
// whose help is printed by parse, not by the flag package.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("idemgen "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs with flags allowed anywhere: before, between and after the
// positional arguments (`idemgen generate spec.yaml -package api -o api`), with one dash
// or two. A lone "--" ends the flags. It returns the positional arguments.
//
// When args ask for help (-h, -help, --help) it prints help and fs's flags to stdout and
// returns exit status ExitOK with done set; on a bad flag the flag package has printed
// the error to stderr, and parse adds where help is, returning ExitUsage with done set.
func parse(fs *flag.FlagSet, args []string, help string, stdout, stderr io.Writer) (positional []string, code int, done bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, fs, help)
			return nil, ExitOK, true
		}
		if err != nil {
			fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", fs.Name())
			return nil, ExitUsage, true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, ExitOK, false
		}
		// flag.Parse stops at the first non-flag argument, and consumes a "--" before it.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), ExitOK, false
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// printHelp writes help and then fs's flags with their defaults.
func printHelp(w io.Writer, fs *flag.FlagSet, help string) {
	io.WriteString(w, help)
	var n int
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	io.WriteString(w, "\nFlags (one dash or two, anywhere on the line):\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}
