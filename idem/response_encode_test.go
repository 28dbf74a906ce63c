package idem

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// headerCases are header lines that take every path of the stored header's encoding and of
// WriteTo: repeated names, names as written (not canonical), Set-Cookie, values with
// characters json.Marshal escapes, invalid UTF-8, none at all.
var headerCases = map[string][]HeaderLine{
	"none":         nil,
	"empty":        {},
	"plain":        {{"Content-Type", "application/json"}, {"Location", "/payments/pay_1"}},
	"repeated":     {{"Link", "<a>; rel=x"}, {"Link", "<b>; rel=y"}, {"X-A", "1"}},
	"as written":   {{"x-lower", "v"}, {"X-Lower", "w"}},
	"cookies only": {{"Set-Cookie", "a=1"}, {"set-cookie", "b=2"}},
	"cookie among": {{"Content-Type", "text/plain"}, {"Set-Cookie", "s=1"}, {"X-B", "2"}},
	"escapes":      {{"X-Q", `say "hi" \ <&> é ` + "\t\x01\x7f\u2028"}, {"X-Bad", "a\xffb"}, {"", ""}},
}

// TestEncodeStoredHeader: the response_headers column is what json.Marshal made of
// StoredHeader before encodeStoredHeader wrote it by hand.
func TestEncodeStoredHeader(t *testing.T) {
	for name, lines := range headerCases {
		r := &Response{Header: lines}
		want, err := json.Marshal(r.StoredHeader())
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeStoredHeader(r)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %s, %v; json.Marshal gives %s", name, got, err, want)
		}
		var back []HeaderLine
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%s: %s does not decode: %v", name, got, err)
		}
	}
}

// TestWriteToAddsLines: WriteTo's header is what http.Header.Add of each line gives, on
// top of what the writer already had.
func TestWriteToAddsLines(t *testing.T) {
	for name, lines := range headerCases {
		want := http.Header{"X-Lower": {"server"}}
		for _, l := range lines {
			want.Add(l.Name, l.Value)
		}
		w := httptest.NewRecorder()
		w.Header().Set("X-Lower", "server")
		if err := (&Response{Status: 201, Header: lines, Body: []byte("x")}).WriteTo(w); err != nil {
			t.Fatal(err)
		}
		if got := w.Result().Header; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: header %v, want %v", name, got, want)
		}
		// Adding to a name after WriteTo leaves the other names' values alone.
		w.Header().Add("X-A", "more")
		if lines := w.Header()["Link"]; name == "repeated" && len(lines) != 2 {
			t.Errorf("%s: Link %v", name, lines)
		}
	}
}
