package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// referenceFingerprint is Fingerprint as it was first written: each value encoded,
// decoded into any (UseNumber) and encoded again. Fingerprint must give the same bytes
// for every input: fingerprints are stored with the keys, and a different one would
// answer a correct retry 422.
func referenceFingerprint(operation string, parts ...Part) ([]byte, error) {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(operation))
	for _, p := range parts {
		b, err := json.Marshal(p.Value)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var tree any
		if err := dec.Decode(&tree); err != nil {
			return nil, err
		}
		v, err := json.Marshal(tree)
		if err != nil {
			return nil, err
		}
		field([]byte(p.Name))
		field(v)
	}
	return h.Sum(nil), nil
}

// checkMatchesReference fails t unless Fingerprint and referenceFingerprint agree on parts:
// the same fingerprint, or both an error.
func checkMatchesReference(t *testing.T, what string, parts ...Part) {
	t.Helper()
	want, wantErr := referenceFingerprint("op", parts...)
	got, err := Fingerprint("op", parts...)
	if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
		t.Errorf("%s: Fingerprint = %x, %v; the reference gives %x, %v", what, got, err, want, wantErr)
	}
}

type fpInner struct {
	Z string `json:"z"`
	A []any  `json:"a,omitempty"`
}

type fpOuter struct {
	Zeta   int             `json:"zeta"`
	Alpha  *fpInner        `json:"alpha,omitempty"`
	Mid    map[string]any  `json:"mid"`
	Raw    json.RawMessage `json:"raw,omitempty"`
	Float  float64         `json:"float"`
	Ignore string          `json:"-"`
	NoTag  bool
}

// TestFingerprintMatchesReference compares Fingerprint with the reference encoding on
// values that take each path of the canonical form: sorted and unsorted objects, repeated
// keys, escapes the encoder writes and escapes it keeps inside raw JSON, invalid UTF-8,
// numbers in their literal forms, nesting at encoding/json's limit and past it.
func TestFingerprintMatchesReference(t *testing.T) {
	d := "rent <&> \u2028 \"q\" \\ é"
	raws := []string{
		`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"b":1,"a":2,"b":3,"a":4}`, `{"a":{"y":1,"x":[{"d":1,"c":2}]},"a":{}}`,
		`"\u0041\/\n"`, `{"\u0062":1,"a":2,"b\u0000":3,"b":4}`, `"\ud800"`, `"<&>"`, `"\u2028"`,
		"\"\xff\xfe\"", "{\"k\xff\":1,\"k\":2}", `[1e3,-0,1E+2,0.10,123456789012345678901234567890]`,
		`{"":1," ":2,"!":3}`, `{}`, `[]`, `[[],{},[{}]]`, `null`, `true`, `false`, ` { "b" : [ 1 , 2 ] , "a" : null } `,
		`{"é":1,"e":2,"z":3,"É":4}`, `{"a":"\u00e9","b":"é"}`, "\"\x7f\"",
	}
	for _, r := range raws {
		checkMatchesReference(t, r, Part{Name: "body", Value: json.RawMessage(r)})
	}
	values := map[string]any{
		"struct": fpOuter{Zeta: 1, Alpha: &fpInner{Z: d, A: []any{1, "x", nil, 2.5}}, Mid: map[string]any{"q": 1, "b": []int{}},
			Raw: json.RawMessage(`{"y":1,"x":2}`), Float: 1e21, NoTag: true},
		"empty struct":   fpOuter{},
		"nil pointer":    (*fpOuter)(nil),
		"nil":            nil,
		"string":         d,
		"invalid utf-8":  "a\xffb",
		"bytes":          []byte("bytes <>"),
		"map int keys":   map[int]string{10: "x", 2: "y"},
		"floats":         []float64{0, -0.0, 1e-7, 1e21, math.MaxFloat64, 123.456},
		"sorted keys":    map[string]int{"a": 1, "b": 2},
		"multipart-ish":  []partDigest{{Name: "f", FileName: "a.txt", ContentType: "text/plain", SHA256: "00"}},
		"unencodable":    make(chan int),
		"NaN":            math.NaN(),
		"invalid raw":    json.RawMessage(`{"a":}`),
		"two raw values": json.RawMessage(`1 2`),
		"deep ok":        json.RawMessage(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)),
		"too deep value": nest(10001),
		"deep value":     nest(10000),
	}
	for name, v := range values {
		checkMatchesReference(t, name, Part{Name: "body", Value: v})
	}
	checkMatchesReference(t, "several parts", Part{"path id", "pay_1"}, Part{"query", map[string]any{"z": 1, "a": 2}},
		Part{"body", fpOuter{Zeta: 3}})
}

// nest is a value of n nested arrays.
func nest(n int) any {
	var v any = []any{}
	for range n - 1 {
		v = []any{v}
	}
	return v
}

// TestFingerprintPinned pins the fingerprint of the payments example's request: the
// value stored with every key of that operation.
func TestFingerprintPinned(t *testing.T) {
	d := "bench"
	fp, err := Fingerprint("createPayment", Part{Name: "body", Value: benchPayment{Amount: 1234, Currency: "EUR", Description: &d}})
	if err != nil {
		t.Fatal(err)
	}
	const want = "b0587ef93e89d207b073bdf93d210aef2b9f73757ab828907932160131209744"
	if got := hex.EncodeToString(fp); got != want {
		t.Fatalf("fingerprint %s, want %s", got, want)
	}
}

// FuzzFingerprintMatchesReference: any raw JSON body, and the same decoded into any,
// fingerprints as the reference encoding does.
//
//	go test ./idem -run '^$' -fuzz FuzzFingerprintMatchesReference -fuzztime 30s
func FuzzFingerprintMatchesReference(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,{"d":"\u00e9","c":1.50}]}`, `{"a":1,"a":2}`, `"\ud83d\ude00<"`, "[\"\xff\"]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkMatchesReference(t, fmt.Sprintf("%q", body), Part{Name: "body", Value: json.RawMessage(body)})
		var v any
		if json.Unmarshal([]byte(body), &v) == nil {
			checkMatchesReference(t, fmt.Sprintf("decoded %q", body), Part{Name: "body", Value: v})
		}
	})
}

// BenchmarkFingerprintDeepUnsorted: a ~1 MB body of 5,000 nested objects whose keys are
// out of order, a large string at the bottom. The one-pass canonical form copies each
// unsorted object's members again to sort them, so the bottom string is copied once per
// enclosing level (depth × size); the reference's decoded tree is encoded once.
//
//	go test ./idem -run '^$' -bench FingerprintDeepUnsorted -benchtime 5x
func BenchmarkFingerprintDeepUnsorted(b *testing.B) {
	const depth = 5000
	body := json.RawMessage(strings.Repeat(`{"b":`, depth) + `"` + strings.Repeat("x", 900<<10) + `"` + strings.Repeat(`,"a":1}`, depth))
	for _, f := range []struct {
		name string
		fp   func(string, ...Part) ([]byte, error)
	}{{"reference", referenceFingerprint}, {"Fingerprint", Fingerprint}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := f.fp("op", Part{"body", body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A body nested deep with its keys out of order at every level would make the one-pass
// form copy the innermost content once per level; past its budget the value is decoded
// instead, with the same canonical form (and the same for parts after it).
func TestFingerprintDeepUnsortedMatchesReference(t *testing.T) {
	const depth = 200
	deep := json.RawMessage(strings.Repeat(`{"b":`, depth) + `"` + strings.Repeat("x", 64<<10) + `"` + strings.Repeat(`,"a":1}`, depth))
	raw, _ := json.Marshal(deep)
	budget := canonicalBudget(len(raw))
	if _, _, err := appendCanonical(nil, raw, 0, &budget); !errors.Is(err, errCanonicalBudget) {
		t.Fatalf("the one-pass form of the deep body: %v, want errCanonicalBudget (the case this test is for)", err)
	}
	checkMatchesReference(t, "deep unsorted body", Part{"path", "p"}, Part{"body", deep}, Part{"after", map[string]int{"z": 1, "a": 2}})
}
