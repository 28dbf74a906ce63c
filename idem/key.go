package idem

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLen is the longest idempotency key accepted, in bytes.
const MaxKeyLen = 255

// DefaultKeyHeader is the request header that carries the idempotency key, per IETF
// draft-ietf-httpapi-idempotency-key-header §2.
const DefaultKeyHeader = "Idempotency-Key"

// ReplayedHeader is set to "true" on every replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// ErrInvalidKey is wrapped by every error [ParseKey] returns.
var ErrInvalidKey = errors.New("invalid idempotency key")

// ParseKey validates one raw idempotency key value and returns the key.
//
// raw is the header field value as received (or the body field's value, from [KeyFromBody]).
// Accepted forms, per draft-ietf-httpapi-idempotency-key-header §2.1 (the value is an
// RFC 8941 sf-string): the quoted form `"abc"` (with \" and \\ escapes) and, leniently, the
// bare form `abc`. The key must be 1–[MaxKeyLen] bytes of printable ASCII (0x20–0x7E) and
// must not begin or end with a space: a blank key (`"   "`) or one with leading or
// trailing spaces (`" abc"`) is refused in every form, since a client, proxy or log that
// trims it would make it another key. Spaces inside are kept (`"a b"`). A bare value
// holding a comma is read as several values and rejected: a request carries one key.
// Spaces and tabs around the whole raw value are optional whitespace of the header field
// (RFC 9110 §5.6.3), not part of the key, and are ignored (net/http strips them before a
// handler sees the value anyway); blanks only is an empty value.
//
// Errors wrap [ErrInvalidKey] and say which rule failed.
func ParseKey(raw string) (string, error) {
	v := strings.Trim(raw, " \t")
	if v == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if v[0] == '"' {
		return parseSFString(v)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == ',':
			return "", fmt.Errorf("%w: more than one value (a comma outside a quoted string)", ErrInvalidKey)
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("%w: byte 0x%02x at offset %d is not printable ASCII", ErrInvalidKey, c, i)
		}
	}
	return checkKey(v)
}

// checkKey applies the rules every parsed key obeys, bare or quoted: 1–MaxKeyLen bytes, no
// surrounding spaces. (Bytes are checked where the form is read.)
func checkKey(k string) (string, error) {
	switch {
	case k == "":
		return "", fmt.Errorf("%w: empty", ErrInvalidKey)
	case strings.Trim(k, " ") == "":
		return "", fmt.Errorf("%w: blank (spaces only)", ErrInvalidKey)
	case k[0] == ' ' || k[len(k)-1] == ' ':
		return "", fmt.Errorf("%w: leading or trailing space", ErrInvalidKey)
	case len(k) > MaxKeyLen:
		return "", fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(k), MaxKeyLen)
	}
	return k, nil
}

// parseSFString reads an RFC 8941 §3.3.3 sf-string: DQUOTE *(unescaped / "\" (DQUOTE / "\")) DQUOTE.
func parseSFString(v string) (string, error) {
	var b strings.Builder
	i := 1
	for ; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", fmt.Errorf("%w: bad escape in quoted string", ErrInvalidKey)
			}
			b.WriteByte(v[i])
		case c == '"':
			if rest := strings.TrimLeft(v[i+1:], " \t"); rest != "" {
				if rest[0] == ',' {
					return "", fmt.Errorf("%w: more than one value", ErrInvalidKey)
				}
				return "", fmt.Errorf("%w: text after the closing quote", ErrInvalidKey)
			}
			return checkKey(b.String())
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("%w: byte 0x%02x at offset %d is not printable ASCII", ErrInvalidKey, c, i)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("%w: unterminated quoted string", ErrInvalidKey)
}

// KeyFromHeader returns the raw idempotency key from header field lines (the values of an
// http.Header entry, one element per received line). present is false when there is none.
// More than one line is an error wrapping [ErrInvalidKey]: a request carries one key.
func KeyFromHeader(values []string) (raw string, present bool, err error) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
		return values[0], true, nil
	}
	return "", true, fmt.Errorf("%w: %d header lines, want one", ErrInvalidKey, len(values))
}

// KeyFromBody returns the raw idempotency key at pointer (an RFC 6901 JSON pointer, e.g.
// "/idempotency_key") in body's JSON encoding, for APIs that carry the key in the request
// body. It returns nil when body is nil or the value is absent or null. A value that is
// not a string, and a string that is blank or begins or ends with a space or tab (a JSON
// string has no optional whitespace to strip, see [ParseKey]), is an error wrapping
// [ErrInvalidKey] (answer it 400, like a bad header).
func KeyFromBody(body any, pointer string) (*string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: body: %w", ErrInvalidKey, err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%w: body: %w", ErrInvalidKey, err)
	}
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil
		}
		v = m[unescape.Replace(tok)]
	}
	switch k := v.(type) {
	case nil:
		return nil, nil
	case string:
		if strings.Trim(k, " \t") != k {
			return nil, fmt.Errorf("%w: the body's %s is blank or begins or ends with a space or tab", ErrInvalidKey, pointer)
		}
		return &k, nil
	default:
		return nil, fmt.Errorf("%w: the body's %s is a %T, not a string", ErrInvalidKey, pointer, v)
	}
}
