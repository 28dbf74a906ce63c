package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
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
func Fingerprint(operation string, parts ...Part) ([]byte, error) {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(operation))
	for _, p := range parts {
		v, err := canonicalJSON(p.Value)
		if err != nil {
			return nil, fmt.Errorf("idem: fingerprint of %s: %w", p.Name, err)
		}
		field([]byte(p.Name))
		field(v)
	}
	return h.Sum(nil), nil
}

// canonicalJSON encodes v as JSON with object keys sorted at every depth.
func canonicalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return json.Marshal(tree)
}
