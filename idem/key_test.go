package idem

import (
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		name, raw, want string
		bad             bool
	}{
		{name: "bare", raw: "8e03978e-40d5-43e8-bc93-6894a57f9324", want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "quoted sf-string", raw: `"8e03978e-40d5"`, want: "8e03978e-40d5"},
		{name: "quoted with escapes", raw: `"a\"b\\c"`, want: `a"b\c`},
		{name: "surrounding whitespace", raw: "  abc\t", want: "abc"},
		{name: "255 bytes", raw: strings.Repeat("k", 255), want: strings.Repeat("k", 255)},
		{name: "quoted comma is one value", raw: `"a,b"`, want: "a,b"},
		{name: "empty", raw: "", bad: true},
		{name: "blank", raw: "   ", bad: true},
		{name: "empty quoted", raw: `""`, bad: true},
		{name: "blank quoted", raw: `"   "`, bad: true},
		{name: "quoted, leading space", raw: `" abc"`, bad: true},
		{name: "quoted, trailing space", raw: `"abc "`, bad: true},
		{name: "quoted, space inside", raw: `"a b"`, want: "a b"},
		{name: "bare, space inside", raw: "a b", want: "a b"},
		{name: "256 bytes", raw: strings.Repeat("k", 256), bad: true},
		{name: "256 bytes quoted", raw: `"` + strings.Repeat("k", 256) + `"`, bad: true},
		{name: "multi-byte UTF-8", raw: "clé-1", bad: true},
		{name: "NUL", raw: "ab\x00c", bad: true},
		{name: "control character", raw: "ab\x1bc", bad: true},
		{name: "DEL", raw: "ab\x7fc", bad: true},
		{name: "newline", raw: "ab\nc", bad: true},
		{name: "two bare values", raw: "a, b", bad: true},
		{name: "two quoted values", raw: `"a", "b"`, bad: true},
		{name: "unterminated quote", raw: `"abc`, bad: true},
		{name: "text after quote", raw: `"abc"x`, bad: true},
		{name: "bad escape", raw: `"a\nb"`, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.raw)
			if tt.bad {
				if !errors.Is(err, ErrInvalidKey) {
					t.Fatalf("ParseKey(%q) = %q, %v; want ErrInvalidKey", tt.raw, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", tt.raw, got, err, tt.want)
			}
		})
	}
}

func TestKeyFromHeader(t *testing.T) {
	if _, ok, err := KeyFromHeader(nil); ok || err != nil {
		t.Fatal("no header lines must be absent")
	}
	if raw, ok, err := KeyFromHeader([]string{"a"}); raw != "a" || !ok || err != nil {
		t.Fatal(raw, ok, err)
	}
	if _, _, err := KeyFromHeader([]string{"a", "b"}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("two lines: %v", err)
	}
}

func TestFingerprintCanonical(t *testing.T) {
	type body struct {
		Amount   int            `json:"amount"`
		Currency string         `json:"currency"`
		Meta     map[string]any `json:"meta"`
	}
	a, _ := Fingerprint("op", Part{"id", "1"}, Part{"body", body{100, "EUR", map[string]any{"x": 1, "y": 2}}})
	b, _ := Fingerprint("op", Part{"id", "1"}, Part{"body", map[string]any{"meta": map[string]any{"y": 2, "x": 1}, "currency": "EUR", "amount": 100}})
	if string(a) != string(b) || len(a) != 32 {
		t.Fatal("same request in another key order must have the same fingerprint")
	}
	for name, other := range map[string][]Part{
		"other body":      {{"id", "1"}, {"body", body{101, "EUR", nil}}},
		"other path":      {{"id", "2"}, {"body", body{100, "EUR", map[string]any{"x": 1, "y": 2}}}},
		"shifted bounds":  {{"i", "d1"}, {"body", body{100, "EUR", map[string]any{"x": 1, "y": 2}}}},
		"missing a param": {{"body", body{100, "EUR", map[string]any{"x": 1, "y": 2}}}},
	} {
		c, _ := Fingerprint("op", other...)
		if string(c) == string(a) {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	if c, _ := Fingerprint("op2", Part{"id", "1"}, Part{"body", body{100, "EUR", map[string]any{"x": 1, "y": 2}}}); string(c) == string(a) {
		t.Error("other operation: same fingerprint")
	}
	if _, err := Fingerprint("op", Part{"bad", make(chan int)}); err == nil {
		t.Error("an unencodable value must be an error")
	}
}

func TestKeyFromBody(t *testing.T) {
	type meta struct {
		Key any `json:"request/key"`
	}
	type body struct {
		Key  any   `json:"idempotency_key,omitempty"`
		Meta *meta `json:"meta,omitempty"`
	}
	for _, tt := range []struct {
		name    string
		body    any
		pointer string
		want    string // "" = nil
		bad     bool
	}{
		{"top-level", body{Key: "k1"}, "/idempotency_key", "k1", false},
		{"nested, escaped token", body{Meta: &meta{Key: "k2"}}, "/meta/request~1key", "k2", false},
		{"absent", body{}, "/idempotency_key", "", false},
		{"nil body", (*body)(nil), "/idempotency_key", "", false},
		{"parent absent", body{}, "/meta/request~1key", "", false},
		{"a number", body{Key: 42}, "/idempotency_key", "", true},
		{"an object", body{Key: map[string]int{"a": 1}}, "/idempotency_key", "", true},
		{"blank", body{Key: "   "}, "/idempotency_key", "", true},
		{"leading space", body{Key: " k1"}, "/idempotency_key", "", true},
		{"trailing tab", body{Key: "k1\t"}, "/idempotency_key", "", true},
		{"space inside", body{Key: "k 1"}, "/idempotency_key", "k 1", false},
	} {
		got, err := KeyFromBody(tt.body, tt.pointer)
		switch {
		case tt.bad:
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("%s: err = %v, want ErrInvalidKey", tt.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want == "" && got != nil, tt.want != "" && (got == nil || *got != tt.want):
			t.Errorf("%s: got %v, want %q", tt.name, got, tt.want)
		}
	}
}
