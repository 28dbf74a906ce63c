package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// Fuzz targets. Their seed corpora are in testdata/fuzz/<FuzzName>/ (plus the f.Add seeds
// below), so `go test` runs every seed as an ordinary test; to search for new failures:
//
//	go test ./idem -run '^$' -fuzz FuzzParseKey -fuzztime 30s
//	go test ./idem -run '^$' -fuzz FuzzFingerprintCanonical -fuzztime 30s

// FuzzParseKey checks ParseKey on any header value:
//   - it never panics, and every error wraps ErrInvalidKey;
//   - an accepted key is 1..MaxKeyLen bytes of printable ASCII (0x20-0x7E) that neither
//     begins nor ends with a space (so it is never blank);
//   - the accepted key round-trips: its sf-string (quoted) form parses to it, and so does
//     its bare form when it has one (no comma, no leading DQUOTE);
//   - nothing valid is refused: when the input itself is such a key, its quoted form is
//     accepted and yields it; and nothing invalid is accepted: when the input is printable
//     ASCII with a leading or trailing space (blank included), its quoted form is refused.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"abc", `"abc"`, `"a\"b\\c"`, " \tkey\t ", strings.Repeat("k", 255), strings.Repeat("k", 256),
		`"` + strings.Repeat("k", 255) + `"`, "a,b", `"a,b"`, `"a", "b"`, `"abc" x`, `"bad\escape"`,
		"", " ", `""`, `"   "`, `" abc"`, `"abc "`, `"a b"`, "nul\x00byte", "é", "\x7f", "line\nbreak", `"unterminated`, `a"b`, `"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		k, err := ParseKey(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("ParseKey(%q): error %v does not wrap ErrInvalidKey", raw, err)
			}
			if k != "" {
				t.Fatalf("ParseKey(%q) = %q with error %v", raw, k, err)
			}
		} else {
			if !validKey(k) {
				t.Fatalf("ParseKey(%q) accepted %q: not 1..%d printable ASCII bytes without surrounding spaces", raw, k, MaxKeyLen)
			}
			if got, err := ParseKey(quoteKey(k)); err != nil || got != k {
				t.Fatalf("quoted form %s of accepted key %q: %q, %v", quoteKey(k), k, got, err)
			}
			if hasBareForm(k) {
				if got, err := ParseKey(k); err != nil || got != k {
					t.Fatalf("bare form of accepted key %q: %q, %v", k, got, err)
				}
			}
		}
		switch {
		case validKey(raw):
			if got, err := ParseKey(quoteKey(raw)); err != nil || got != raw {
				t.Fatalf("valid key %q refused in its quoted form %s: %q, %v", raw, quoteKey(raw), got, err)
			}
		case printableASCII(raw) && raw != "" && (raw[0] == ' ' || raw[len(raw)-1] == ' '):
			if got, err := ParseKey(quoteKey(raw)); !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("key %q with a surrounding space accepted in its quoted form %s: %q, %v", raw, quoteKey(raw), got, err)
			}
		}
	})
}

// validKey is the rule of ParseKey: 1..MaxKeyLen printable ASCII bytes, no leading or
// trailing space.
func validKey(k string) bool {
	return len(k) >= 1 && len(k) <= MaxKeyLen && printableASCII(k) && k[0] != ' ' && k[len(k)-1] != ' '
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// quoteKey is the RFC 8941 sf-string serialisation of a printable ASCII key.
func quoteKey(k string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
}

func hasBareForm(k string) bool {
	return !strings.Contains(k, ",") && k[0] != '"'
}

// FuzzFingerprintCanonical checks that a request body's fingerprint does not depend on the
// order of object keys or on insignificant whitespace: the body is re-serialised with its
// keys permuted (at every depth, by a seeded shuffle) and random whitespace between tokens,
// and both forms must fingerprint alike, whether passed as raw JSON or decoded into
// map[string]any. Bodies with a repeated key are skipped (which one wins depends on order
// in any JSON decoder). Changing the operation, the part name or a value must change the
// fingerprint.
func FuzzFingerprintCanonical(f *testing.F) {
	for _, s := range []string{
		`{"amount":100,"currency":"EUR","description":"rent"}`,
		`{"b":{"y":[1,2,{"q":true,"p":null}],"x":"é\u00e9"},"a":1.50}`,
		`{"n":1e3,"m":-0,"big":123456789012345678901234567890}`,
		`[{"b":1,"a":2},{"d":[],"c":{}}]`,
		`{"":"empty key","\u0000":"nul key","a\"b":"quote"}`,
		`"just a string"`, `42`, `null`, `{}`,
	} {
		f.Add(s, uint64(1))
	}
	f.Fuzz(func(t *testing.T, body string, seed uint64) {
		tree, ok := parseOrdered([]byte(body))
		if !ok {
			return // not JSON, or a repeated key
		}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		var a, b bytes.Buffer
		tree.write(&a, nil)
		tree.write(&b, rng)
		fpA, err := Fingerprint("createPayment", Part{Name: "body", Value: json.RawMessage(a.Bytes())})
		if err != nil {
			t.Fatalf("Fingerprint(%s): %v", a.Bytes(), err)
		}
		fpB, err := Fingerprint("createPayment", Part{Name: "body", Value: json.RawMessage(b.Bytes())})
		if err != nil {
			t.Fatalf("Fingerprint(%s): %v", b.Bytes(), err)
		}
		if len(fpA) != 32 || !bytes.Equal(fpA, fpB) {
			t.Fatalf("fingerprints differ:\n%s\n%s", a.Bytes(), b.Bytes())
		}
		if fpRaw, err := Fingerprint("createPayment", Part{Name: "body", Value: json.RawMessage(body)}); err != nil || !bytes.Equal(fpA, fpRaw) {
			t.Fatalf("the body as received fingerprints differently from its re-serialisation (%v):\n%q\n%s", err, body, a.Bytes())
		}
		var decoded any
		dec := json.NewDecoder(bytes.NewReader(b.Bytes()))
		dec.UseNumber()
		if err := dec.Decode(&decoded); err != nil {
			t.Fatalf("decoding %s: %v", b.Bytes(), err)
		}
		if fpC, err := Fingerprint("createPayment", Part{Name: "body", Value: decoded}); err != nil || !bytes.Equal(fpA, fpC) {
			t.Fatalf("decoded value fingerprints differently from its JSON (%v):\n%s", err, b.Bytes())
		}
		if other, _ := Fingerprint("createRefund", Part{Name: "body", Value: json.RawMessage(a.Bytes())}); bytes.Equal(fpA, other) {
			t.Fatal("another operation has the same fingerprint")
		}
		if other, _ := Fingerprint("createPayment", Part{Name: "query", Value: json.RawMessage(a.Bytes())}); bytes.Equal(fpA, other) {
			t.Fatal("another part name has the same fingerprint")
		}
		if other, _ := Fingerprint("createPayment", Part{Name: "body", Value: []any{json.RawMessage(a.Bytes())}}); bytes.Equal(fpA, other) {
			t.Fatal("a different value has the same fingerprint")
		}
	})
}

// node is a JSON value with its object keys in document order.
type node struct {
	scalar json.RawMessage // for strings, numbers, true, false, null
	keys   []string        // object keys, in order (nil for an array)
	vals   []*node         // object values or array elements
	object bool
	array  bool
}

// parseOrdered reads one JSON value keeping key order; ok is false for invalid JSON,
// trailing data, or an object with a repeated key.
func parseOrdered(data []byte) (*node, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, ok := readNode(dec)
	if !ok {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return n, true
}

func readNode(dec *json.Decoder) (*node, bool) {
	tok, err := dec.Token()
	if err != nil {
		return nil, false
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &node{object: v == '{', array: v == '['}
		seen := map[string]bool{}
		for dec.More() {
			if n.object {
				kt, err := dec.Token()
				if err != nil {
					return nil, false
				}
				k := kt.(string)
				// Keys equal after decoding (escapes, invalid UTF-8 replaced) are one key.
				if seen[k] {
					return nil, false
				}
				seen[k] = true
				n.keys = append(n.keys, k)
			}
			child, ok := readNode(dec)
			if !ok {
				return nil, false
			}
			n.vals = append(n.vals, child)
		}
		if _, err := dec.Token(); err != nil { // closing delimiter
			return nil, false
		}
		return n, true
	case string:
		b, _ := json.Marshal(v)
		return &node{scalar: b}, true
	case json.Number:
		return &node{scalar: json.RawMessage(v.String())}, true
	case bool, nil:
		b, _ := json.Marshal(v)
		return &node{scalar: b}, true
	}
	return nil, false
}

var blanks = []string{"", " ", "\n", "\t", "\r\n  ", "   "}

// write serialises n; with rng, object keys are shuffled and whitespace is sprinkled.
func (n *node) write(w *bytes.Buffer, rng *rand.Rand) {
	ws := func() {
		if rng != nil {
			w.WriteString(blanks[rng.IntN(len(blanks))])
		}
	}
	ws()
	switch {
	case n.object, n.array:
		open, end := "[", "]"
		if n.object {
			open, end = "{", "}"
		}
		w.WriteString(open)
		order := make([]int, len(n.vals))
		for i := range order {
			order[i] = i
		}
		if rng != nil && n.object {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for j, i := range order {
			if j > 0 {
				ws()
				w.WriteString(",")
			}
			if n.object {
				ws()
				k, _ := json.Marshal(n.keys[i])
				w.Write(k)
				ws()
				w.WriteString(":")
			}
			n.vals[i].write(w, rng)
		}
		ws()
		w.WriteString(end)
	default:
		w.Write(n.scalar)
	}
	ws()
}

// TestFingerprintTypedEqualsMap: the generated code passes the decoded typed body; a
// struct and a map with the same fields fingerprint alike, whatever the field order.
func TestFingerprintTypedEqualsMap(t *testing.T) {
	type payment struct {
		Currency    string  `json:"currency"`
		Amount      int64   `json:"amount"`
		Description *string `json:"description,omitempty"`
	}
	d := "rent"
	typed, err := Fingerprint("op", Part{Name: "body", Value: payment{Amount: 100, Currency: "EUR", Description: &d}})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"amount":100,"currency":"EUR","description":"rent"}`,
		`{ "description" : "rent", "currency":"EUR",
		   "amount": 100 }`,
	} {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		got, err := Fingerprint("op", Part{Name: "body", Value: m})
		if err != nil || !bytes.Equal(got, typed) {
			t.Errorf("%s: fingerprint differs from the typed body's (%v)", body, err)
		}
	}
}
