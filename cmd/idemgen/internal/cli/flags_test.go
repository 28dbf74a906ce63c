package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flags go anywhere on the line, with one dash or two; "--" ends them.
func TestFlagsAnywhere(t *testing.T) {
	spec := golden + "truemarker/openapi.yaml"
	for _, args := range [][]string{
		{"generate", spec, "-package", "truemarker", "-o", "DIR"},
		{"generate", "-package", "truemarker", spec, "-o", "DIR"},
		{"generate", spec, "--package", "truemarker", "--o=DIR"},
		{"generate", "--package=truemarker", "-o", "DIR", "--", spec},
	} {
		dir := t.TempDir()
		for i, a := range args {
			args[i] = strings.Replace(a, "DIR", dir, 1)
		}
		if code, _, stderr := run(args...); code != ExitOK {
			t.Errorf("idemgen %s: exit %d: %s", strings.Join(args, " "), code, stderr)
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "idempotent.gen.go")); err != nil {
			t.Errorf("idemgen %s: %v", strings.Join(args, " "), err)
		}
	}
	// After "--" a dash is an argument, not a flag.
	code, _, stderr := run("generate", "-package", "p", "-o", t.TempDir(), "--", "-check")
	if code != ExitFail || !strings.Contains(stderr, "-check") {
		t.Errorf(`"--" then "-check": exit %d (want 1, a missing spec file named -check): %s`, code, stderr)
	}
	// A second positional argument is still an error, wherever it is.
	code, _, stderr = run("generate", spec, "-package", "p", "extra.yaml", "-o", t.TempDir())
	if code != ExitUsage || !strings.Contains(stderr, "want one SPEC file, got 2 arguments") {
		t.Errorf("two specs: exit %d: %s", code, stderr)
	}
}

// Every subcommand answers -h, --help and `idemgen help CMD` on stdout with exit 0,
// listing its flags.
func TestSubcommandHelp(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"generate": {"-check", "-client", "-server", "-router ROUTER", "-base BASE", "-package NAME", "-o DIR", "one dash or two"},
		"schema":   {"idempotency_keys"},
		"purge":    {"-database-url URL", "-batch N", "-dry-run", "-timeout D", "DATABASE_URL"},
		"keys":     {"-database-url URL", "-json", "-stale-after D", "keys show", "keys held"},
		"version":  {"--version", "VCS revision", "(devel)"},
		"hammer":   {"-url URL", "-keys K", "-key-format FORMAT", "-timeout TIMEOUT", "one dash or two"},
	} {
		for _, args := range [][]string{{cmd, "-h"}, {cmd, "--help"}, {cmd, "-help"}, {"help", cmd}} {
			code, stdout, stderr := run(args...)
			if code != ExitOK || stderr != "" || !strings.HasPrefix(stdout, "usage: idemgen "+cmd) {
				t.Errorf("idemgen %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), code, stderr, stdout)
				continue
			}
			for _, f := range flags {
				if !strings.Contains(stdout, f) {
					t.Errorf("idemgen %s does not mention %q:\n%s", strings.Join(args, " "), f, stdout)
				}
			}
		}
	}
}

// A mistyped flag, a bad value or a missing one is one line on stderr naming it, with the
// closest flag when one is close, and where help is; exit status 2. Other usage errors
// end the same way.
func TestMistypedFlag(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	const genHelp = "; run 'idemgen generate -help' for usage\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "-routr", "chi"}, "idemgen generate: unknown flag -routr (did you mean -router?)" + genHelp},
		{[]string{"generate", "openapi.yaml", "--pakage=api", "-o", "api"}, "idemgen generate: unknown flag --pakage (did you mean -package?)" + genHelp},
		{[]string{"generate", "-outt", "foo"}, "idemgen generate: unknown flag -outt (did you mean -o?)" + genHelp},
		{[]string{"generate", "-Check"}, "idemgen generate: unknown flag -Check (did you mean -check?)" + genHelp},
		{[]string{"generate", "-spec", "x.yaml", "-outt", "foo"}, "idemgen generate: unknown flag -spec (the spec file is an argument: idemgen generate [flags] SPEC)" + genHelp},
		{[]string{"generate", "-x"}, "idemgen generate: unknown flag -x" + genHelp},
		{[]string{"generate", "-bogus"}, "idemgen generate: unknown flag -bogus" + genHelp},
		{[]string{"generate", "-o"}, "idemgen generate: flag needs an argument: -o" + genHelp},
		{[]string{"purge", "-dryrun"}, "idemgen purge: unknown flag -dryrun (did you mean -dry-run?); run 'idemgen purge -help' for usage\n"},
		{[]string{"version", "-o", "x"}, "idemgen version: unknown flag -o (it takes no flags); run 'idemgen version -help' for usage\n"},
		{[]string{"schema", "-citsu"}, "idemgen schema: unknown flag -citsu (did you mean -citus?); run 'idemgen schema -help' for usage\n"},
		// A flag that begins exactly one flag.
		{[]string{"generate", "-ch"}, "idemgen generate: unknown flag -ch (did you mean -check?)" + genHelp},
		{[]string{"generate", "-c"}, "idemgen generate: unknown flag -c" + genHelp}, // -check, -client
		{[]string{"purge", "-time", "1m"}, "idemgen purge: unknown flag -time (did you mean -timeout?); run 'idemgen purge -help' for usage\n"},
		{[]string{"hammer", "-ke", "10"}, "idemgen hammer: unknown flag -ke; run 'idemgen hammer -help' for usage\n"}, // -keys, -key-header, ...
		// Values: what the flag wants.
		{[]string{"purge", "-timeout", "5"}, `idemgen purge: -timeout: "5" is not a duration (want one such as 10m or 30s); run 'idemgen purge -help' for usage` + "\n"},
		{[]string{"purge", "-batch", "many"}, `idemgen purge: -batch: "many" is not a whole number; run 'idemgen purge -help' for usage` + "\n"},
		{[]string{"hammer", "-timeout", "5", "-url", "http://x"}, `idemgen hammer: -timeout: "5" is not a duration (want one such as 10m or 30s); run 'idemgen hammer -help' for usage` + "\n"},
		{[]string{"hammer", "-urll", "http://x"}, "idemgen hammer: unknown flag -urll (did you mean -url?); run 'idemgen hammer -help' for usage\n"},
		{[]string{"hammer", "-url", "http://x", "-n", "abc"}, `idemgen hammer: -n: "abc" is not a whole number; run 'idemgen hammer -help' for usage` + "\n"},
		{[]string{"hammer", "-url", "http://x", "-H", "bad header"}, `idemgen hammer: -H: want 'Name: value', got "bad header"; run 'idemgen hammer -help' for usage` + "\n"},
		// Before the command.
		{[]string{"-routr", "chi"}, "idemgen: unknown flag -routr before the command (did you mean idemgen generate -router?); run 'idemgen -help' for usage\n"},
		{[]string{"-spec", "x.yaml", "-outt", "foo"}, "idemgen: unknown flag -spec before the command (flags follow it: idemgen generate [flags] SPEC); run 'idemgen -help' for usage\n"},
		{[]string{"-package", "api", "-o", "api", "openapi.yaml"}, "idemgen: unknown flag -package before the command (did you mean idemgen generate -package?); run 'idemgen -help' for usage\n"},
		{[]string{"-url", "http://x"}, "idemgen: unknown flag -url before the command (did you mean idemgen hammer -url?); run 'idemgen -help' for usage\n"},
		{[]string{"-c", "10"}, "idemgen: unknown flag -c before the command (did you mean idemgen hammer -c?); run 'idemgen -help' for usage\n"},
		// Usage errors after the flags are parsed: the same one line form.
		{[]string{"generate", "-o", "x", "spec.yaml"}, "idemgen generate: missing -package (idemgen generate -package NAME -o DIR SPEC)" + genHelp},
		{[]string{"generate", "spec.yaml"}, "idemgen generate: missing -package and -o (idemgen generate -package NAME -o DIR SPEC)" + genHelp},
		{[]string{"generate"}, "idemgen generate: missing -package, -o and the SPEC file (idemgen generate -package NAME -o DIR SPEC)" + genHelp},
		{[]string{"generate", "-package", "p-q"}, "idemgen generate: -package \"p-q\" is not a Go identifier\nidemgen generate: missing -o and the SPEC file (idemgen generate -package NAME -o DIR SPEC)" + genHelp},
		{[]string{"--vers"}, "idemgen: unknown flag --vers (did you mean --version?); run 'idemgen -help' for usage\n"},
		{[]string{"schema", "extra"}, `idemgen schema: takes no arguments, got "extra"; run 'idemgen schema -help' for usage` + "\n"},
		{[]string{"version", "extra"}, `idemgen version: takes no arguments, got "extra"; run 'idemgen version -help' for usage` + "\n"},
		{[]string{"purge", "-database-url", "postgres://x", "extra"}, `idemgen purge: unexpected argument "extra"; run 'idemgen purge -help' for usage` + "\n"},
		{[]string{"keys", "show", "k1"}, `idemgen keys show: want SCOPE and KEY (SCOPE "" when the service sets no scope), got 1 argument; run 'idemgen keys show -help' for usage` + "\n"},
		{[]string{"keys", "show"}, `idemgen keys show: want SCOPE and KEY (SCOPE "" when the service sets no scope), got 0 arguments; run 'idemgen keys show -help' for usage` + "\n"},
		{[]string{"hammer", "-url", "http://x", "-c", "0"}, "idemgen hammer: -c must be at least 1, got 0; run 'idemgen hammer -help' for usage\n"},
	} {
		code, stdout, stderr := run(c.args...)
		if code != ExitUsage || stdout != "" || stderr != c.want {
			t.Errorf("idemgen %s: exit %d, stdout %q, stderr\n%q\nwant exit %d and\n%q", strings.Join(c.args, " "), code, stdout, stderr, ExitUsage, c.want)
		}
	}
}

// An unknown command is one line: the closest command when one is close, and where help
// is; exit status 2.
func TestUnknownCommand(t *testing.T) {
	const help = "; run 'idemgen -help' for usage\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generat", "spec.yaml"}, `idemgen: unknown command "generat" (did you mean generate?)` + help},
		{[]string{"gen"}, `idemgen: unknown command "gen" (did you mean generate?)` + help},
		{[]string{"hamer", "-url", "http://x"}, `idemgen: unknown command "hamer" (did you mean hammer?)` + help},
		{[]string{"frobnicate"}, `idemgen: unknown command "frobnicate"` + help},
		{[]string{"help", "shema"}, `idemgen: unknown command "shema" (did you mean schema?)` + help},
	} {
		code, stdout, stderr := run(c.args...)
		if code != ExitUsage || stdout != "" || stderr != c.want {
			t.Errorf("idemgen %s: exit %d, stdout %q, stderr\n%q\nwant exit %d and\n%q", strings.Join(c.args, " "), code, stdout, stderr, ExitUsage, c.want)
		}
	}
}
