// Package cliflag parses the flags of idemgen's subcommands the same way for all of them:
// flags anywhere on the line, with one dash or two; -h prints the help and the flags to
// stdout; a bad flag is one line on stderr that names it, says what was wrong with its
// value, suggests the closest flag, and says where help is.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit statuses [Parse] returns; the idemgen command and its subcommands use the same.
const (
	ExitOK    = 0 // help was printed
	ExitUsage = 2 // a bad flag or argument
)

// Hint says what an unknown flag name may have meant, for a command whose users are known
// to type it ("the spec file is an argument: ..."); "" when it has nothing to say.
type Hint func(name string) string

// NewFlagSet returns an empty flag set for command name ("idemgen purge"). It prints
// nothing itself: [Parse] prints help and errors.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args into fs with flags allowed anywhere: before, between and after the
// positional arguments (`idemgen generate spec.yaml -package api -o api`), with one dash
// or two. A lone "--" ends the flags. It returns the positional arguments.
//
// When args ask for help (-h, -help, --help) it prints help and fs's flags to stdout and
// returns [ExitOK] with done set. On a bad flag it prints one line to stderr (see
// [Error]; hints are asked about an unknown flag first) and returns [ExitUsage] with done
// set.
func Parse(fs *flag.FlagSet, args []string, help string, stdout, stderr io.Writer, hints ...Hint) (positional []string, code int, done bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			PrintHelp(stdout, fs, help)
			return nil, ExitOK, true
		}
		if err != nil {
			fmt.Fprintln(stderr, Error(fs, err, args, hints...))
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

// PrintHelp writes help and then fs's flags with their defaults.
func PrintHelp(w io.Writer, fs *flag.FlagSet, help string) {
	io.WriteString(w, help)
	if numFlags(fs) == 0 {
		return
	}
	io.WriteString(w, "\nFlags (one dash or two, anywhere on the line):\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// numFlags returns how many flags fs defines.
func numFlags(fs *flag.FlagSet) int {
	var n int
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n
}
