package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemgen/idemgen/gen/internal/base"
	"github.com/idemgen/idemgen/gen/internal/spec"
)

// specLayer is what templates/spec.go.tmpl renders.
type specLayer struct {
	Version string
	Package string
	Spec    string   // base name of the spec file
	JSON    bool     // the text is JSON (decoded with encoding/json at run time)
	Inlined bool     // the spec's $refs to other files are inlined
	Pieces  []string // Go literals of the text's pieces between backquotes
}

// Spec renders SpecFile: the spec's text, embedded as Go string literals, and
// OpenAPI(), which parses it once. A self-contained spec is embedded as it is; one with
// $refs to other files is loaded afresh, its references inlined (kin-openapi's
// InternalizeRefs, as the base does) and embedded as JSON, so the package needs no file
// at run time.
func Spec(opts base.Target, s *spec.Spec) ([]byte, error) {
	l := specLayer{Version: opts.Version, Package: opts.Package, Spec: baseName(opts.Spec)}
	text := s.Data
	// A JSON file whose content $refs were resolved is embedded as the YAML of its tree.
	l.JSON = s.Src.JSON && json.Valid(text)
	if s.Src.ExternalRefs() {
		doc, err := spec.LoadDoc(opts.Spec, s.Data)
		if err != nil {
			return nil, err
		}
		doc.InternalizeRefs(context.Background(), nil)
		raw, err := doc.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding the inlined spec: %w", err)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, raw, "", "  "); err != nil {
			return nil, fmt.Errorf("encoding the inlined spec: %w", err)
		}
		text, l.JSON, l.Inlined = append(indented.Bytes(), '\n'), true, true
	}
	l.Pieces = goPieces(string(text))
	// The template writes gofmt's layout itself (TestSpecFileIsFormatted): formatting a
	// spec of megabytes again (go/format parses and prints every literal) cost a tenth of
	// the generation of a 4 MB spec.
	var b bytes.Buffer
	// The file is its pieces, a line each, and 2-3 KB of code around them: sized once,
	// not doubled up to it (a buffer grown by doubling holds up to twice the text until
	// the run ends).
	size := 4096
	for _, p := range l.Pieces {
		size += len(p) + len("\t,\n")
	}
	b.Grow(size)
	if err := tmpl.ExecuteTemplate(&b, "spec.go.tmpl", l); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", base.SpecFile, err)
	}
	return b.Bytes(), nil
}

// goPieces cuts text at its backquotes and returns each piece as a Go literal: a raw
// string when it can hold the piece unchanged (valid UTF-8, no carriage return, NUL or
// byte order mark, which a raw string drops or the compiler refuses), else a quoted one.
// CRLF line ends become LF first: the spec means the same.
func goPieces(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	parts := strings.Split(text, "`")
	out := make([]string, len(parts))
	for i, p := range parts {
		if utf8.ValidString(p) && !strings.ContainsAny(p, "\r\x00\ufeff") {
			out[i] = "`" + p + "`"
		} else {
			out[i] = strconv.Quote(p)
		}
	}
	return out
}
