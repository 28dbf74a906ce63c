package spec

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Pos is a position in a spec file. Line and Col are 1-based; zero means unknown.
type Pos struct {
	File string // the spec's path as the user gave it (or a file it refers to)
	Line int
	Col  int
}

// String is "file:line:col", "file:line" without a column, "file" without a line.
func (p Pos) String() string {
	switch {
	case p.Line > 0 && p.Col > 0:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	case p.Line > 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return p.File
}

// Error is a spec error with its location. Error() is "file:line:col: message".
type Error struct {
	Pos Pos
	Msg string // the message, without the position
}

// Error is "pos: msg", or msg alone when the position has no file.
func (e *Error) Error() string {
	if e.Pos.File == "" {
		return e.Msg
	}
	return e.Pos.String() + ": " + e.Msg
}

// ErrorList is every error found in a spec, in file order. It implements error; use
// errors.As to get at the list.
//
// Every step adds to one list (Add) and reports it once, sorted (Err); gen.Generate
// returns it as gen.ErrorList, the same errors.
type ErrorList []*Error

// Error is the errors' texts, one a line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Add adds the error at p, its message formatted as fmt.Sprintf does.
func (l *ErrorList) Add(p Pos, format string, args ...any) {
	*l = append(*l, &Error{Pos: p, Msg: fmt.Sprintf(format, args...)})
}

// Err returns the list sorted by position (then message) without repeats, or nil when it
// is empty. Repeats come from x-idempotent-defaults: each operation that inherits a bad
// value reports it at the same place.
func (l *ErrorList) Err() error {
	if len(*l) == 0 {
		return nil
	}
	sort.SliceStable(*l, func(i, j int) bool {
		a, b := (*l)[i].Pos, (*l)[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return (*l)[i].Msg < (*l)[j].Msg
	})
	*l = slices.CompactFunc(*l, func(a, b *Error) bool { return *a == *b })
	return *l
}

// Errors returns the located errors in err (an ErrorList or *Error), or nil.
func Errors(err error) []*Error {
	var l ErrorList
	if errors.As(err, &l) {
		return l
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	return nil
}
