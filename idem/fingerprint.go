package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"
)

// Part is one named input of a request fingerprint: a path parameter, a query parameter or
// the body. Value is encoded as canonical JSON (see [Fingerprint]).
type Part struct {
	Name  string
	Value any
}

// Fingerprint returns the 32-byte SHA-256 fingerprint of a request: the operation, then each
// part in the order given (the generated code passes path parameters, query parameters and
// the decoded body, in spec order). Values are encoded as JSON, decoded again and re-encoded
// with sorted object keys and no insignificant whitespace, so a request whose body differs
// only in key order or whitespace (also inside json.RawMessage unions) has the same
// fingerprint; numbers keep their literal text. Each field is length-prefixed, so no two different
// inputs share an encoding. An error only comes from a value json cannot encode.
//
// The canonical form is what encoding/json's decoding into any (numbers as json.Number)
// and re-encoding give, byte for byte, but it is computed from the first encoding in one
// pass (appendCanonical), without building the decoded tree: fingerprints stored with keys
// stay valid (TestFingerprintMatchesReference pins the equivalence).
func Fingerprint(operation string, parts ...Part) ([]byte, error) {
	b := fingerprintBuffers.Get().(*fingerprintBuffer)
	defer b.release()
	stream := appendField(b.stream[:0], operation)
	for _, p := range parts {
		b.raw.Reset()
		if err := b.enc.Encode(p.Value); err != nil {
			return nil, fmt.Errorf("idem: fingerprint of %s: %w", p.Name, err)
		}
		raw := bytes.TrimSuffix(b.raw.Bytes(), []byte("\n")) // Encode ends the value with a newline
		stream = appendField(stream, p.Name)
		at := len(stream)
		stream = binary.BigEndian.AppendUint64(stream, 0) // the length, set below
		var rest []byte
		var err error
		budget := canonicalBudget(len(raw))
		stream, rest, err = appendCanonical(stream, raw, 0, &budget)
		if errors.Is(err, errCanonicalBudget) {
			stream, err = canonicalByDecoding(stream[:at+8], raw)
		} else if err == nil && len(rest) != 0 {
			err = errors.New("idem: trailing data after a JSON value")
		}
		if err != nil {
			return nil, fmt.Errorf("idem: fingerprint of %s: %w", p.Name, err)
		}
		binary.BigEndian.PutUint64(stream[at:], uint64(len(stream)-at-8))
	}
	b.stream = stream
	sum := sha256.Sum256(stream)
	return sum[:], nil
}

// appendField appends s with its length (8 bytes, big-endian) in front.
func appendField(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(len(s)))
	return append(dst, s...)
}

// fingerprintBuffer holds one Fingerprint call's buffers: the encoder's output and the
// stream that is hashed.
type fingerprintBuffer struct {
	raw    bytes.Buffer
	enc    *json.Encoder
	stream []byte
}

// maxPooledFingerprintBuffer is the largest buffer kept for the next call: a large body
// is not held in memory after its request.
const maxPooledFingerprintBuffer = 64 << 10

var fingerprintBuffers = sync.Pool{New: func() any {
	b := &fingerprintBuffer{}
	b.enc = json.NewEncoder(&b.raw) // escapes HTML as json.Marshal does
	return b
}}

func (b *fingerprintBuffer) release() {
	if b.raw.Cap() > maxPooledFingerprintBuffer || cap(b.stream) > maxPooledFingerprintBuffer {
		return
	}
	fingerprintBuffers.Put(b)
}

// maxCanonicalDepth is encoding/json's nesting limit when it decodes: a value nested
// deeper is an error there, and so here.
const maxCanonicalDepth = 10000

var errCanonicalSyntax = errors.New("idem: fingerprint: unexpected JSON from the encoder")

// errCanonicalBudget: appendCanonical moved more bytes than its budget (canonicalBudget)
// sorting nested objects; the value's canonical form is computed by decoding it instead.
var errCanonicalBudget = errors.New("idem: fingerprint: sorting budget exceeded")

// canonicalBudget is how many bytes appendCanonical may move sorting the objects of a value
// of n bytes: a few times the value, so that a deeply nested body whose keys are out of
// order at every level (each level copying its content again: depth × size) costs at most
// a decode and an encode, not a copy per level.
func canonicalBudget(n int) int { return 8*n + 4096 }

// canonicalByDecoding appends the canonical form of the JSON value raw by decoding it into
// any (numbers as json.Number) and encoding it with json.Marshal: the definition that
// appendCanonical computes in one pass (TestFingerprintMatchesReference).
func canonicalByDecoding(dst, raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return dst, err
	}
	v, err := json.Marshal(tree)
	if err != nil {
		return dst, err
	}
	return append(dst, v...), nil
}

// appendCanonical appends the canonical form of the JSON value at the start of src to dst
// and returns the rest of src. src is encoding/json's output (valid and compact, strings
// HTML-escaped); the canonical form is that of decoding it into any with UseNumber and
// encoding the result with json.Marshal: object keys sorted bytewise by their decoded
// value (the last of repeated keys wins), strings re-escaped as json.Marshal escapes them,
// numbers and literals as written.
func appendCanonical(dst, src []byte, depth int, budget *int) ([]byte, []byte, error) {
	if len(src) == 0 {
		return dst, nil, errCanonicalSyntax
	}
	switch c := src[0]; {
	case c == '"':
		return appendCanonicalString(dst, src)
	case c == '{' || c == '[':
		if depth++; depth > maxCanonicalDepth {
			return dst, nil, errors.New("idem: fingerprint: exceeded max depth")
		}
		if c == '[' {
			return appendCanonicalArray(dst, src, depth, budget)
		}
		return appendCanonicalObject(dst, src, depth, budget)
	case c == 't' || c == 'n':
		return appendToken(dst, src, 4)
	case c == 'f':
		return appendToken(dst, src, 5)
	case c == '-' || '0' <= c && c <= '9':
		n := 1
		for n < len(src) && bytes.IndexByte([]byte("0123456789+-.eE"), src[n]) >= 0 {
			n++
		}
		return appendToken(dst, src, n)
	}
	return dst, nil, errCanonicalSyntax
}

func appendToken(dst, src []byte, n int) ([]byte, []byte, error) {
	if len(src) < n {
		return dst, nil, errCanonicalSyntax
	}
	return append(dst, src[:n]...), src[n:], nil
}

// stringToken returns the length of the string token at the start of src (quotes
// included) and whether it holds an escape.
func stringToken(src []byte) (n int, escaped bool, err error) {
	for i := 1; i < len(src); i++ {
		switch src[i] {
		case '"':
			return i + 1, escaped, nil
		case '\\':
			escaped = true
			i++
		}
	}
	return 0, false, errCanonicalSyntax
}

// appendCanonicalString appends the string token at the start of src as json.Marshal
// encodes its decoded value: as it is when it has no escape and is valid UTF-8 (the
// encoder's own escaping is json.Marshal's), else decoded and encoded again.
func appendCanonicalString(dst, src []byte) ([]byte, []byte, error) {
	n, escaped, err := stringToken(src)
	if err != nil {
		return dst, nil, err
	}
	tok := src[:n]
	if !escaped && utf8.Valid(tok) {
		return append(dst, tok...), src[n:], nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return dst, nil, err
	}
	enc, err := json.Marshal(s)
	if err != nil {
		return dst, nil, err
	}
	return append(dst, enc...), src[n:], nil
}

func appendCanonicalArray(dst, src []byte, depth int, budget *int) ([]byte, []byte, error) {
	dst = append(dst, '[')
	src = src[1:]
	if len(src) > 0 && src[0] == ']' {
		return append(dst, ']'), src[1:], nil
	}
	for {
		var err error
		if dst, src, err = appendCanonical(dst, src, depth, budget); err != nil {
			return dst, nil, err
		}
		if len(src) == 0 {
			return dst, nil, errCanonicalSyntax
		}
		switch src[0] {
		case ',':
			dst, src = append(dst, ','), src[1:]
		case ']':
			return append(dst, ']'), src[1:], nil
		default:
			return dst, nil, errCanonicalSyntax
		}
	}
}

// member is one member of an object being canonicalised: its decoded key (for the
// order) and where its canonical form ("key":value) lies in dst. The members are written
// as they come, comma-separated; when their keys are not in order they are written again
// after them, sorted, and moved down.
type member struct {
	key        []byte
	start, end int
}

func appendCanonicalObject(dst, src []byte, depth int, budget *int) ([]byte, []byte, error) {
	dst = append(dst, '{')
	src = src[1:]
	if len(src) > 0 && src[0] == '}' {
		return append(dst, '}'), src[1:], nil
	}
	var small [8]member
	members := small[:0]
	base := len(dst)
	for {
		if len(src) == 0 || src[0] != '"' {
			return dst, nil, errCanonicalSyntax
		}
		n, escaped, err := stringToken(src)
		if err != nil {
			return dst, nil, err
		}
		if len(members) > 0 {
			dst = append(dst, ',')
		}
		m := member{key: src[1 : n-1], start: len(dst)}
		if escaped || !utf8.Valid(m.key) {
			var k string
			if err := json.Unmarshal(src[:n], &k); err != nil {
				return dst, nil, err
			}
			m.key = []byte(k)
		}
		if dst, src, err = appendCanonicalString(dst, src); err != nil {
			return dst, nil, err
		}
		if len(src) == 0 || src[0] != ':' {
			return dst, nil, errCanonicalSyntax
		}
		dst = append(dst, ':')
		if dst, src, err = appendCanonical(dst, src[1:], depth, budget); err != nil {
			return dst, nil, err
		}
		m.end = len(dst)
		members = append(members, m)
		if len(src) == 0 {
			return dst, nil, errCanonicalSyntax
		}
		if src[0] == '}' {
			src = src[1:]
			break
		}
		if src[0] != ',' {
			return dst, nil, errCanonicalSyntax
		}
		src = src[1:]
	}
	if inOrder(members) { // already sorted, no repeated key (a typed body's fields often are)
		return append(dst, '}'), src, nil
	}
	// Sorting writes the members again and moves them down: each unordered object copies
	// its whole content twice, so nested unordered objects copy their innermost content once
	// per level. Past the budget, Fingerprint decodes the value instead.
	if *budget -= 2 * (len(dst) - base); *budget < 0 {
		return dst, nil, errCanonicalBudget
	}
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	// Write the members again after the unordered ones, in order (the last of a repeated
	// key), then move them down.
	end := len(dst)
	for i, m := range members {
		if i+1 < len(members) && bytes.Equal(members[i+1].key, m.key) {
			continue
		}
		if len(dst) > end {
			dst = append(dst, ',')
		}
		dst = append(dst, dst[m.start:m.end]...)
	}
	n := copy(dst[base:], dst[end:])
	dst = dst[:base+n]
	return append(dst, '}'), src, nil
}

// inOrder reports members whose keys are strictly increasing.
func inOrder(members []member) bool {
	for i := 1; i < len(members); i++ {
		if bytes.Compare(members[i-1].key, members[i].key) >= 0 {
			return false
		}
	}
	return true
}
