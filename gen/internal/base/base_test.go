package base

import (
	"bytes"
	"go/format"
	"go/parser"
	"go/token"
	"testing"
)

// TestGofmtIsFormatSource: the base's single print gives go/format's bytes, on what
// oapi-codegen's templates leave unformatted: unsorted and duplicated imports, number
// literals gofmt spells canonically, bad indentation, comments.
func TestGofmtIsFormatSource(t *testing.T) {
	src := []byte(`// Package api is a test.
package api

import (
	"strings"
	"fmt"
  "encoding/json"
	"fmt"

	// runtime is oapi-codegen's
	"github.com/oapi-codegen/runtime"
	"bytes"
)

const (
Hex = 0X1F
Exp = 1E5
Oct = 0O17
  Imag = 0X1p-2i
)

type T struct {
Name string ` + "`json:\"name\"`" + `
	  LongerName   *int ` + "`json:\"longer_name,omitempty\"`" + ` // a comment
}

func f() {
if true {
return
}
	_ = strings.ToUpper; _ = fmt.Sprint; _ = json.Marshal; _ = runtime.BindStyledParameter; _ = bytes.Equal
}
`)
	want, err := format.Source(src)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := gofmt(&got, fset, f); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("gofmt:\n%s\nformat.Source:\n%s", got.Bytes(), want)
	}
	if bytes.Contains(want, []byte("0X1F")) || !bytes.Contains(want, []byte("1e5")) {
		t.Errorf("the case exercises no number normalisation:\n%s", want)
	}
}
