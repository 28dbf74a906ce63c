package pgbouncer

import (
	"fmt"
	"strings"
	"testing"
)

// fakeTB records what Require asks of a test instead of stopping it.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Skipf(format string, args ...any)  { f.skipped = fmt.Sprintf(format, args...) }
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

// Without pgbouncer, Require skips and names the install command; under CI=true it fails
// with the same message.
func TestRequireWithoutPgBouncer(t *testing.T) {
	saved := installPaths
	t.Cleanup(func() { installPaths = saved })
	installPaths = nil
	t.Setenv("PATH", t.TempDir())

	t.Setenv("CI", "")
	var tb fakeTB
	Require(&tb)
	if tb.failed != "" || !strings.Contains(tb.skipped, "apt-get install -y pgbouncer") {
		t.Errorf("outside CI: skipped %q, failed %q; want a skip naming the install command", tb.skipped, tb.failed)
	}

	t.Setenv("CI", "true")
	tb = fakeTB{}
	Require(&tb)
	if tb.skipped != "" || !strings.Contains(tb.failed, "apt-get install -y pgbouncer") || !strings.Contains(tb.failed, "CI=true") {
		t.Errorf("under CI=true: skipped %q, failed %q; want a failure naming the install command", tb.skipped, tb.failed)
	}
}

// With pgbouncer installed, Require lets the test run.
func TestRequireWithPgBouncer(t *testing.T) {
	if _, err := Find(); err != nil {
		Require(t) // skips, or fails under CI
	}
	var tb fakeTB
	Require(&tb)
	if tb.skipped != "" || tb.failed != "" {
		t.Errorf("pgbouncer is installed, yet skipped %q, failed %q", tb.skipped, tb.failed)
	}
}
