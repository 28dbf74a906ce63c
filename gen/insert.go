package gen

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// InsertMarkers returns the text of the spec file at path with `x-idempotent: true` added
// to each of ops (by method and path) as a line of its own, inserted before the
// operation's first key with that key's indentation: nothing else of the file changes
// (formatting, comments, key order, line endings), so that its diff has insertions only.
// YAML and JSON both. An operation written in flow style ({...} on one line), or with no
// key yet, cannot take a line of its own: it is an error, located at the operation, as is
// one that is marked already. An operation of a path item that is a $ref within the file
// is marked where the $ref points; one whose path item is in another file is an error at
// the $ref: the other file is not written.
func InsertMarkers(path string, ops []Annotation) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	src, err := spec.ParseSource(path, data)
	if err != nil {
		return nil, located(err)
	}
	eol := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		eol = "\r\n"
	}
	lines := strings.SplitAfter(string(data), "\n")
	insert := map[int]string{} // before line (1-based): the line to insert
	var errs spec.ErrorList
	for _, a := range ops {
		k, op := src.Operation(a.Path, strings.ToLower(a.Method))
		_, n := src.Lookup("paths", a.Path)
		if item, ref := src.PathItem(n); item == nil && ref != nil {
			errs.Add(src.Pos(ref), "%s %s: its path item is in another file (%s): cannot write %s there, only into %s; move the path item into %s to mark it", a.Method, a.Path, ref.Value, MarkerExt, path, path)
			continue
		}
		if k == nil || op == nil {
			errs.Add(Pos{File: path}, "%s %s: no such operation in the file", a.Method, a.Path)
			continue
		}
		if mk, _ := spec.Entry(op, MarkerExt); mk != nil {
			errs.Add(src.Pos(mk), "%s %s is marked already", a.Method, a.Path)
			continue
		}
		if !src.JSON && op.Style&yaml.FlowStyle != 0 {
			errs.Add(src.Pos(k), "%s %s: the operation is written in flow style ({...}): cannot insert %s as a line of its own (write it in block style)", a.Method, a.Path, MarkerExt)
			continue
		}
		if len(op.Content) == 0 || op.Content[0].Line <= k.Line || op.Content[0].Line > len(lines) {
			errs.Add(src.Pos(k), "%s %s: the operation has no key on a line of its own to insert %s before (write it in block style)", a.Method, a.Path, MarkerExt)
			continue
		}
		first := op.Content[0]
		text := strings.TrimRight(lines[first.Line-1], "\r\n")
		indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
		if first.Column < 1 || len(indent) != first.Column-1 {
			errs.Add(src.Pos(k), "%s %s: the operation's first key does not start its line: cannot insert %s (write it in block style)", a.Method, a.Path, MarkerExt)
			continue
		}
		line := indent + MarkerExt + ": true"
		if src.JSON {
			line = indent + `"` + MarkerExt + `": true,`
		}
		insert[first.Line] = line + eol
	}
	if err := errs.Err(); err != nil {
		return nil, located(err)
	}
	var b strings.Builder
	b.Grow(len(data) + 32*len(insert))
	for i, l := range lines {
		if s, ok := insert[i+1]; ok {
			b.WriteString(s)
		}
		b.WriteString(l)
	}
	if len(insert) != len(ops) {
		return nil, fmt.Errorf("%s: %d operations given, %d markers placed", path, len(ops), len(insert))
	}
	return []byte(b.String()), nil
}
