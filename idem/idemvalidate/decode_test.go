package idemvalidate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// One decoder, reused from body to body, decodes each as a fresh json.Decoder with
// UseNumber would: top-level scalars that end only at the end of the input, white space
// before and after, bodies larger than its buffer, then small ones again.
func TestDecoderReuse(t *testing.T) {
	d := decoders.New().(*decoder)
	for _, body := range []string{
		`{"amount":1999,"currency":"EUR"}`,
		`123`, `-0.5e3`, `"s"`, `true`, `null`,
		"  \n\t{\"a\":[1,2,{\"b\":null}]}\r\n  ",
		`{"big":"` + strings.Repeat("x", 5000) + `","n":12345678901234567890}`,
		`7`,
		`{"k":"\u00e9\"\\"}` + strings.Repeat(" ", 700),
		`[]`, `{}`,
	} {
		if !json.Valid([]byte(body)) {
			t.Fatalf("%.20q is not JSON", body)
		}
		want := fresh(t, body)
		got, err := d.decode([]byte(body))
		if err != nil {
			t.Fatalf("%.20q: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%.20q: got %#v, want %#v", body, got, want)
		}
	}
}

func fresh(t *testing.T, body string) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
