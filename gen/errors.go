package gen

import (
	"errors"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// Pos is a position in a spec file. Line and Col are 1-based; zero means unknown.
type Pos = spec.Pos

// Error is a spec error with its location. Error() is "file:line:col: message".
type Error = spec.Error

// ErrorList is every error found in a spec, in file order. It implements error; use
// errors.As to get at the list.
type ErrorList []*Error

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

// Errors returns the located errors in err (an ErrorList or *Error), or nil.
func Errors(err error) []*Error {
	var l ErrorList
	if errors.As(err, &l) {
		return l
	}
	var sl spec.ErrorList
	if errors.As(err, &sl) {
		return sl
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	return nil
}

// located returns err with the steps' error list (spec.ErrorList, the same errors) as
// an ErrorList, the type callers ask errors.As for; any other error as it is.
func located(err error) error {
	if l, ok := err.(spec.ErrorList); ok {
		return ErrorList(l)
	}
	return err
}
