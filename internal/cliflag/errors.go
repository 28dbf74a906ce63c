package cliflag

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The flag package's error messages that Error rewrites.
const (
	notDefined   = "flag provided but not defined: -"
	invalidValue = "invalid value "         // %q for flag -NAME: CAUSE
	invalidBool  = "invalid boolean value " // %q for -NAME: CAUSE
	outOfRange   = "value out of range"
)

// UsageLine is the one line of a usage error of command (its full name, "idemgen purge"):
// "idemgen purge: MSG; run 'idemgen purge -help' for usage". Every usage error of idemgen
// ends this way.
func UsageLine(command, msg string) string {
	return fmt.Sprintf("%s: %s; run '%s -help' for usage", command, msg, command)
}

// Error is the line for err, an error of fs.Parse(args), in the form of [UsageLine]:
//
//	idemgen generate: unknown flag -routr (did you mean -router?); run 'idemgen generate -help' for usage
//	idemgen purge: -timeout: "5" is not a duration (want one such as 10m or 30s); run ...
//
// An unknown flag is named as it was typed (one dash or two), with what the first hint
// that has something to say says about it, else the closest flag of fs (see [Closest]).
// A bad value names the flag and what its type wants.
func Error(fs *flag.FlagSet, err error, args []string, hints ...Hint) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, notDefined); ok {
		msg = "unknown flag " + typed(name, args)
		if hint := unknownHint(fs, name, hints); hint != "" {
			msg += " (" + hint + ")"
		}
	} else if name, value, cause, ok := badValue(msg); ok {
		msg = valueError(fs.Lookup(name), name, value, cause)
	}
	return UsageLine(fs.Name(), msg)
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

// unknownHint says what an unknown flag name of fs may have meant: the first hint's
// answer, "did you mean -router?", "it takes no flags", or "" when nothing is close.
func unknownHint(fs *flag.FlagSet, name string, hints []Hint) string {
	if numFlags(fs) == 0 {
		return "it takes no flags"
	}
	for _, h := range hints {
		if s := h(name); s != "" {
			return s
		}
	}
	if f := Closest(fs, name); f != "" {
		return "did you mean -" + f + "?"
	}
	return ""
}

// badValue splits the flag package's message for a value that its flag refused:
// `invalid value "5" for flag -timeout: parse error` and `invalid boolean value "x" for
// -q: parse error`.
func badValue(msg string) (name, value, cause string, ok bool) {
	rest, isValue := strings.CutPrefix(msg, invalidValue)
	sep := " for flag -"
	if !isValue {
		if rest, ok = strings.CutPrefix(msg, invalidBool); !ok {
			return "", "", "", false
		}
		sep = " for -"
	}
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", "", "", false
	}
	value, _ = strconv.Unquote(quoted)
	rest, ok = strings.CutPrefix(rest[len(quoted):], sep)
	if !ok {
		return "", "", "", false
	}
	name, cause, ok = strings.Cut(rest, ": ")
	return name, value, cause, ok
}

// valueError says why f refused value: what its type wants, or the cause its Set gave
// (a flag of its own type, such as hammer's -H, says it best).
func valueError(f *flag.Flag, name, value, cause string) string {
	prefix := fmt.Sprintf("-%s: %q is ", name, value)
	if cause == outOfRange {
		return prefix + "out of range"
	}
	var v any
	if f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			v = g.Get()
		}
	}
	switch v.(type) {
	case time.Duration:
		return prefix + "not a duration (want one such as 10m or 30s)"
	case int, int64:
		return prefix + "not a whole number"
	case uint, uint64:
		return prefix + "not a whole number of 0 or more"
	case float64:
		return prefix + "not a number"
	case bool:
		return prefix + "not a boolean (true or false)"
	}
	return fmt.Sprintf("-%s: %s", name, cause)
}
