package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// newFlagSet returns a flag set for subcommand name. It prints nothing itself: parse
// prints help and errors.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("idemgen "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs with flags allowed anywhere: before, between and after the
// positional arguments (`idemgen generate spec.yaml -package api -o api`), with one dash
// or two. A lone "--" ends the flags. It returns the positional arguments.
//
// When args ask for help (-h, -help, --help) it prints help and fs's flags to stdout and
// returns exit status ExitOK with done set. On a bad flag it prints one line to stderr
// (see flagError) and returns ExitUsage with done set.
func parse(fs *flag.FlagSet, args []string, help string, stdout, stderr io.Writer) (positional []string, code int, done bool) {
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, fs, help)
			return nil, ExitOK, true
		}
		if err != nil {
			fmt.Fprintln(stderr, flagError(fs, err, args))
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

// notDefined is the flag package's error for a flag fs does not define.
const notDefined = "flag provided but not defined: -"

// flagError is the line for a flag error of fs: "idemgen generate: unknown flag -routr
// (did you mean -router?); run 'idemgen generate -help' for usage". An unknown flag is
// named as it was typed (one dash or two), with the closest flag of fs when one is close.
func flagError(fs *flag.FlagSet, err error, args []string) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, notDefined); ok {
		msg = "unknown flag " + typed(name, args)
		if hint := flagHint(fs, name); hint != "" {
			msg += " (" + hint + ")"
		}
	}
	return fmt.Sprintf("%s: %s; run '%s -help' for usage", fs.Name(), msg, fs.Name())
}

// typed returns flag name as args spell it: -name or --name.
func typed(name string, args []string) string {
	for _, a := range args {
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return "--" + name
		}
	}
	return "-" + name
}

// flagHint says what an unknown flag name of fs may have meant: "did you mean -router?",
// or "" when no flag is close.
func flagHint(fs *flag.FlagSet, name string) string {
	var n int
	fs.VisitAll(func(*flag.Flag) { n++ })
	switch {
	case n == 0:
		return "it takes no flags"
	case fs.Name() == "idemgen generate" && isSpecFlag(name):
		return "the spec file is an argument: idemgen generate [flags] SPEC"
	}
	if f := closestFlag(fs, name); f != "" {
		return "did you mean -" + f + "?"
	}
	return ""
}

// isSpecFlag reports whether name is what other generators call their input file flag.
func isSpecFlag(name string) bool {
	switch strings.ToLower(name) {
	case "spec", "i", "input", "in", "file", "f":
		return true
	}
	return false
}

// flagAliases are names other tools give to flags idemgen spells otherwise: a typed name
// close to one suggests idemgen's flag.
var flagAliases = map[string]string{"out": "o", "output": "o", "pkg": "package"}

// closestFlag returns the flag of fs whose name (or an alias of it) is closest to name,
// within a typo or two (one for names of up to 4 letters), case ignored; or "".
func closestFlag(fs *flag.FlagSet, name string) string {
	name = strings.ToLower(name)
	limit := 1
	if len(name) > 4 {
		limit = 2
	}
	best, bestDist := "", limit+1
	consider := func(candidate, flagName string) {
		if fs.Lookup(flagName) == nil {
			return
		}
		if d := editDistance(name, candidate); d < bestDist && d < len(name) {
			best, bestDist = flagName, d
		}
	}
	fs.VisitAll(func(f *flag.Flag) { consider(f.Name, f.Name) })
	for _, alias := range slices.Sorted(maps.Keys(flagAliases)) {
		consider(alias, flagAliases[alias])
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b: insertions,
// deletions, substitutions and transpositions of adjacent bytes each count one.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
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
