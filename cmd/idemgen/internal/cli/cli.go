// Package cli is the idemgen command: Main takes the arguments and the output streams and
// returns the exit status, so the whole command runs in-process in tests. Each
// subcommand lives in its own file.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/internal/cliflag"
	"github.com/idemgen/idemgen/internal/hammer"
)

// Exit statuses.
const (
	ExitOK    = cliflag.ExitOK    // success; with -check, the files are up to date
	ExitFail  = 1                 // the spec has errors, generation failed, -check found stale files, or a database error
	ExitUsage = cliflag.ExitUsage // bad command, flags or arguments
)

const usage = `idemgen generates idempotent Go HTTP handlers from an OpenAPI 3 spec whose
operations carry x-idempotent markers.

Usage:
  idemgen generate [flags] SPEC   write the handlers (idemgen generate -h)
  idemgen policies [-against OLD] SPEC
                                  print every marked operation's policy, or what changed
  idemgen annotate [-overlay-out FILE | -w] SPEC
                                  what idemgen makes of every operation, the candidates
                                  for a marker; mark them in an overlay, or the spec
  idemgen schema [-citus]         print schema.sql (the idempotency_keys table), or
                                  with -citus its distribution on a Citus cluster
  idemgen purge [flags]           delete expired idempotency keys, e.g. from cron
  idemgen keys show SCOPE KEY     print one idempotency key's row (idemgen keys -h)
  idemgen keys held               list the claims held now, oldest first
  idemgen hammer [flags]          load-test an idempotent endpoint
  idemgen version                 print the version (also --version, -version, -v)
  idemgen help [COMMAND]          print this text, or a command's help

Flags take one dash or two, and may come before or after the arguments.
"idemgen COMMAND -h" lists a command's flags.

In //go:generate, in a Go file beside openapi.yaml (the handlers go to ./api):
  //go:generate go tool idemgen generate -package api -o api openapi.yaml

Errors in the spec are printed as FILE:LINE:COL: message.

Exit status:
  0  success (with -check: the files are up to date)
  1  the spec has errors or cannot be read (a missing file too), generation failed,
     -check found stale files, or a database error
  2  usage error
`

// commands are the subcommands; each takes its arguments (without its name).
var commands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"generate": generate,
	"schema":   schema,
	"policies": policies,
	"annotate": annotate,
	"purge":    purge,
	"keys":     keys,
	"version":  version,
	"hammer": func(args []string, stdout, stderr io.Writer) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return hammer.Main(ctx, args, stdout, stderr)
	},
}

// flagSets return the flags of the commands that have some, for the hint when a flag
// comes before the command.
var flagSets = map[string]func() *flag.FlagSet{
	"generate": func() *flag.FlagSet { fs, _ := newGenerateFlags(); return fs },
	"purge":    func() *flag.FlagSet { fs, _ := newPurgeFlags(); return fs },
	"keys":     func() *flag.FlagSet { fs, _ := newKeysFlags(); return fs },
	"policies": func() *flag.FlagSet { fs, _, _, _, _ := newPoliciesFlags(); return fs },
	"annotate": func() *flag.FlagSet { fs, _, _, _, _ := newAnnotateFlags(); return fs },
	"hammer":   hammer.FlagSet,
}

// flagBeforeCommand is the line for a flag given where the command belongs ("idemgen
// -routr chi"): the command that has that flag, else the closest flag of a command when
// one is close.
func flagBeforeCommand(arg string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	if top := cliflag.Suggest(name, topLevelFlags); top != "" {
		return cliflag.UsageLine("idemgen", fmt.Sprintf("unknown flag %s (did you mean --%s?)", arg, top))
	}
	hint := "flags follow it: idemgen generate [flags] SPEC"
	cmds := slices.Sorted(maps.Keys(flagSets))
	for _, closest := range []func(*flag.FlagSet, string) string{exactFlag, cliflag.Closest} {
		if cmd, f := firstFlag(cmds, closest, name); f != "" {
			hint = fmt.Sprintf("did you mean idemgen %s -%s?", cmd, f)
			break
		}
	}
	return cliflag.UsageLine("idemgen", fmt.Sprintf("unknown flag %s before the command (%s)", arg, hint))
}

// topLevelFlags are the flags idemgen takes before a command (-v is one more spelling of
// --version, too short to suggest).
var topLevelFlags = []string{"version", "help"}

// firstFlag returns the first of cmds whose flag set find finds a flag in for name, and
// that flag.
func firstFlag(cmds []string, find func(*flag.FlagSet, string) string, name string) (cmd, flagName string) {
	for _, cmd := range cmds {
		if f := find(flagSets[cmd](), name); f != "" {
			return cmd, f
		}
	}
	return "", ""
}

// exactFlag returns name when fs defines it, else "".
func exactFlag(fs *flag.FlagSet, name string) string {
	if fs.Lookup(name) != nil {
		return name
	}
	return ""
}

// unknownCommand is the line for a command idemgen does not have: "idemgen: unknown
// command "generat" (did you mean generate?); run 'idemgen -help' for usage".
func unknownCommand(cmd string) string {
	msg := fmt.Sprintf("unknown command %q", cmd)
	if c := cliflag.Suggest(cmd, append(slices.Sorted(maps.Keys(commands)), "help")); c != "" {
		msg += " (did you mean " + c + "?)"
	}
	return cliflag.UsageLine("idemgen", msg)
}

// Main runs idemgen with args (without the program name).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		io.WriteString(stderr, usage)
		return ExitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		if len(rest) == 1 && commands[rest[0]] != nil {
			return commands[rest[0]]([]string{"-h"}, stdout, stderr)
		}
		if len(rest) == 1 {
			fmt.Fprintln(stderr, unknownCommand(rest[0]))
			return ExitUsage
		}
		io.WriteString(stdout, usage)
		return ExitOK
	case "-version", "--version", "-v":
		cmd = "version"
	}
	run := commands[cmd]
	if run == nil && strings.HasPrefix(cmd, "-") {
		fmt.Fprintln(stderr, flagBeforeCommand(cmd))
		return ExitUsage
	}
	if run == nil {
		fmt.Fprintln(stderr, unknownCommand(cmd))
		return ExitUsage
	}
	return run(rest, stdout, stderr)
}
