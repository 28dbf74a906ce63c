package cli

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/gen"
)

func TestVersionForms(t *testing.T) {
	_, want, _ := run("version")
	if !strings.HasPrefix(want, "idemgen ") || !strings.Contains(want, "oapi-codegen "+gen.OapiCodegenVersion) || strings.Count(want, "\n") != 1 {
		t.Fatalf("idemgen version: %q", want)
	}
	for _, form := range []string{"version", "--version", "-version", "-v"} {
		code, stdout, stderr := run(form)
		if code != ExitOK || stdout != want || stderr != "" {
			t.Errorf("idemgen %s: exit %d, stdout %q, stderr %q; want exit 0 and %q", form, code, stdout, stderr, want)
		}
	}
	if code, _, stderr := run("version", "extra"); code != ExitUsage || !strings.Contains(stderr, "takes no arguments") {
		t.Errorf("idemgen version extra: exit %d: %s", code, stderr)
	}
}

func TestVersionLine(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-29T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tools := "oapi-codegen " + gen.OapiCodegenVersion + ", go1.26.8"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go install ...@v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: modulePath, Version: "v1.2.3"}},
			"idemgen v1.2.3 (" + tools + ")"},
		{"go build in a modified checkout", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: modulePath, Version: "v0.0.0-20261129100000-0123456789ab+dirty"}, Settings: vcs},
			"idemgen v0.0.0-20261129100000-0123456789ab+dirty (revision 0123456789ab+dirty 2026-11-29T10:00:00Z; " + tools + ")"},
		{"go tool in a service module", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "example.com/svc", Version: "(devel)"}, Settings: vcs, // the service's repository
			Deps: []*debug.Module{{Path: "github.com/jackc/pgx/v5", Version: "v5.12.0"}, {Path: modulePath, Version: "v1.2.3"}}},
			"idemgen v1.2.3 (" + tools + ")"},
		{"go tool with a local replace", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.2.3", Replace: &debug.Module{Path: "../idemgen"}}}},
			"idemgen v1.2.3 => ../idemgen (" + tools + ")"},
		{"go run in a checkout", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: modulePath, Version: "(devel)"}},
			"idemgen (devel) (" + tools + ")"},
		{"no build info", nil, "idemgen (devel) (oapi-codegen " + gen.OapiCodegenVersion + ", unknown Go)"},
	} {
		if got := versionLine(c.bi); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
