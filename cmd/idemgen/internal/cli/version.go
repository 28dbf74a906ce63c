package cli

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/internal/cliflag"
)

const versionHelp = `usage: idemgen version   (or idemgen --version, -version, -v)

Prints the version of this idemgen binary: its module version from the Go build info
(v1.2.3 after go install ...@v1.2.3 or go get -tool ...@v1.2.3; a pseudo-version or
(devel) when built from a checkout), and, when built from a checkout, the VCS revision
(+dirty with uncommitted changes) and its time; then the oapi-codegen and Go versions.

Generated files name the release only (gen.Version: a tag, else "(devel)"), so that
they do not change with every commit of idemgen.
`

const modulePath = "github.com/idemgen/idemgen"

func version(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version")
	rest, code, done := cliflag.Parse(fs, args, versionHelp, stdout, stderr)
	if done {
		return code
	}
	if len(rest) > 0 {
		return usageErrors(stderr, fs.Name(), fmt.Sprintf("takes no arguments, got %q", rest[0]))
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(bi))
	return ExitOK
}

// versionLine describes the binary of bi (nil when the binary has no build info):
//
//	idemgen v1.2.3 (oapi-codegen v2.8.2, go1.26.8)
//	idemgen v0.0.0-20261129100000-0123456789ab+dirty (revision 0123456789ab+dirty 2026-11-29T10:00:00Z; oapi-codegen v2.8.2, go1.26.8)
func versionLine(bi *debug.BuildInfo) string {
	v, goVersion := "(devel)", "unknown Go"
	var details []string
	if bi != nil {
		goVersion = bi.GoVersion
		v = moduleVersion(bi)
		// The VCS settings describe the main module: idemgen's own checkout, or the
		// service's repository when idemgen is a dependency (go tool), which says
		// nothing about idemgen.
		if rev := revision(bi); rev != "" && bi.Main.Path == modulePath {
			details = append(details, "revision "+rev)
		}
	}
	tools := fmt.Sprintf("oapi-codegen %s, %s", gen.OapiCodegenVersion, goVersion)
	if len(details) > 0 {
		return fmt.Sprintf("idemgen %s (%s; %s)", v, strings.Join(details, " "), tools)
	}
	return fmt.Sprintf("idemgen %s (%s)", v, tools)
}

// moduleVersion is idemgen's module version in bi: the main module's when idemgen was
// built itself (go install, go build in a checkout), else the dependency's (go tool,
// go run from a service module), with its replacement when there is one.
func moduleVersion(bi *debug.BuildInfo) string {
	m := &bi.Main
	if m.Path != modulePath {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				m = d
			}
		}
	}
	if m == nil || m.Version == "" {
		return "(devel)"
	}
	if r := m.Replace; r != nil {
		if r.Version == "" {
			return fmt.Sprintf("%s => %s", m.Version, r.Path)
		}
		return fmt.Sprintf("%s => %s %s", m.Version, r.Path, r.Version)
	}
	return m.Version
}

// revision is "REV[+dirty] TIME" from the VCS settings the go command stamps into
// binaries built inside a checkout; "" when there are none.
func revision(bi *debug.BuildInfo) string {
	var rev, at string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return strings.TrimSpace(rev + " " + at)
}
