package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// headerValue is a flag of its own type whose Set explains its refusal.
type headerValue struct{}

func (headerValue) String() string { return "" }
func (headerValue) Set(s string) error {
	if !strings.Contains(s, ":") {
		return errors.New("want 'Name: value', got " + `"` + s + `"`)
	}
	return nil
}

func testFlags() *flag.FlagSet {
	fs := NewFlagSet("idemgen test")
	fs.Bool("check", false, "")
	fs.Duration("timeout", 0, "")
	fs.Int("n", 0, "")
	fs.Uint("batch", 0, "")
	fs.Float64("ratio", 0, "")
	fs.String("key-header", "", "")
	fs.String("key-prefix", "", "")
	fs.String("o", "", "")
	fs.String("X", "", "")
	fs.Var(headerValue{}, "H", "")
	return fs
}

// Each bad flag is one line that says what was wrong and where help is.
func TestError(t *testing.T) {
	const help = "; run 'idemgen test -help' for usage"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-timeout", "5"}, `-timeout: "5" is not a duration (want one such as 10m or 30s)`},
		{[]string{"--timeout=5 m"}, `-timeout: "5 m" is not a duration (want one such as 10m or 30s)`},
		{[]string{"-n", "abc"}, `-n: "abc" is not a whole number`},
		{[]string{"-n", "99999999999999999999"}, `-n: "99999999999999999999" is out of range`},
		{[]string{"-batch", "-1"}, `-batch: "-1" is not a whole number of 0 or more`},
		{[]string{"-ratio", "x"}, `-ratio: "x" is not a number`},
		{[]string{"-check=maybe"}, `-check: "maybe" is not a boolean (true or false)`},
		{[]string{"-H", "bad header"}, `-H: want 'Name: value', got "bad header"`},
		{[]string{"-o"}, `flag needs an argument: -o`},
		{[]string{"-urll", "x"}, `unknown flag -urll`},
		{[]string{"-tmeout", "5s"}, `unknown flag -tmeout (did you mean -timeout?)`},
		{[]string{"--Chekc"}, `unknown flag --Chekc (did you mean -check?)`},
		{[]string{"-x", "GET"}, `unknown flag -x (did you mean -X?)`},
		{[]string{"-output", "dir"}, `unknown flag -output (did you mean -o?)`},
		{[]string{"-c"}, `unknown flag -c (did you mean -check?)`},
		{[]string{"-time", "1s"}, `unknown flag -time (did you mean -timeout?)`},
		{[]string{"-ke", "x"}, `unknown flag -ke`}, // begins -key-header and -key-prefix
	} {
		fs := testFlags()
		_, code, done := Parse(fs, c.args, "help\n", new(bytes.Buffer), new(bytes.Buffer))
		if code != ExitUsage || !done {
			t.Errorf("%q: exit %d, done %v", c.args, code, done)
		}
		err := testFlags().Parse(c.args)
		if got := Error(testFlags(), err, c.args); got != "idemgen test: "+c.want+help {
			t.Errorf("%q:\n got %q\nwant %q", c.args, got, "idemgen test: "+c.want+help)
		}
	}
}

// A hint speaks first about an unknown flag; a command without flags says so.
func TestErrorHints(t *testing.T) {
	hint := func(name string) string {
		if name == "spec" {
			return "the spec file is an argument"
		}
		return ""
	}
	args := []string{"-spec", "x"}
	if got, want := Error(testFlags(), testFlags().Parse(args), args, hint), "idemgen test: unknown flag -spec (the spec file is an argument); run 'idemgen test -help' for usage"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	args = []string{"-tmeout"}
	if got := Error(testFlags(), testFlags().Parse(args), args, hint); !strings.Contains(got, "did you mean -timeout?") {
		t.Errorf("a hint without an answer hid the closest flag: %q", got)
	}
	none := NewFlagSet("idemgen none")
	args = []string{"-o"}
	if got, want := Error(none, none.Parse(args), args), "idemgen none: unknown flag -o (it takes no flags); run 'idemgen none -help' for usage"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSuggest(t *testing.T) {
	commands := []string{"generate", "schema", "purge", "hammer", "version", "help"}
	for name, want := range map[string]string{
		"generat": "generate", "genrate": "generate", "Generate": "generate", "gen": "generate",
		"shcema": "schema", "purg": "purge", "hamer": "hammer", "v": "version", "he": "help",
		"h": "", "frobnicate": "", "": "",
	} {
		if got := Suggest(name, commands); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"x-idempotent", "x-idempotent", 0},
		{"x-idempotant", "x-idempotent", 1},                  // substitution
		{"x-idempotnet", "x-idempotent", 1},                  // transposition
		{"x-idempotent-default", "x-idempotent-defaults", 1}, // deletion
		{"X-Idempotent", "x-idempotent", 2},                  // case kept
		{"x-idempotency", "x-idempotent", 2},
		{"", "abc", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.b, c.a, got, c.want)
		}
	}
}

// Flags go anywhere; "--" ends them; -h prints the help and the flags to stdout.
func TestParse(t *testing.T) {
	fs := testFlags()
	pos, code, done := Parse(fs, []string{"a", "-n", "3", "b", "--", "-c"}, "", nil, nil)
	if code != ExitOK || done || strings.Join(pos, " ") != "a b -c" || fs.Lookup("n").Value.String() != "3" {
		t.Errorf("positional %q, exit %d, done %v, -n %s", pos, code, done, fs.Lookup("n").Value)
	}
	var stdout, stderr bytes.Buffer
	if _, code, done := Parse(testFlags(), []string{"x", "--help"}, "usage: idemgen test\n", &stdout, &stderr); code != ExitOK || !done ||
		stderr.Len() != 0 || !strings.HasPrefix(stdout.String(), "usage: idemgen test\n\nFlags (one dash or two, anywhere on the line):\n") ||
		!strings.Contains(stdout.String(), "-timeout duration") {
		t.Errorf("help: exit %d, stderr %q, stdout:\n%s", code, stderr.String(), stdout.String())
	}
}
