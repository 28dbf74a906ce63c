package idemclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/idemgen/idemgen/internal/ecmaregexp"
)

// DefaultKeyHeader is the header the protocol reads the key from when the spec names none.
const DefaultKeyHeader = "Idempotency-Key"

// MaxKeyBytes is the protocol's own limit on a key's length, in bytes.
const MaxKeyBytes = 255

// Key says where a request carries its idempotency key and what the spec constrains of
// it: a Header, or a body field. A body key has a JSONPointer, a FormField, or both for
// an operation that accepts both bodies: then the request's Content-Type picks
// (application/x-www-form-urlencoded: the form field; anything else: the JSON pointer).
type Key struct {
	Header      string // header name: Idempotency-Key
	JSONPointer string // RFC 6901 pointer into a JSON request body: /idempotency_key
	FormField   string // field of an application/x-www-form-urlencoded body: idempotency_key

	// The key's declared schema; zero values constrain nothing. A key that breaks them
	// (the caller's or a minted one) fails the call before any request.
	MinLength int    // characters
	MaxLength int    // characters; 0: the protocol's 255 bytes only
	Pattern   string // ECMA-262, as OpenAPI defines pattern (the engine of the server's check)
	Format    string // "uuid" is checked; other formats are not
}

// where names the key's place, for messages.
func (k Key) where() string {
	switch {
	case k.JSONPointer != "":
		return "body " + k.JSONPointer
	case k.FormField != "":
		return "form field " + k.FormField
	}
	return "header " + k.Header
}

func (k Key) validPlace() error {
	body := k.JSONPointer != "" || k.FormField != ""
	if (k.Header != "") == body {
		return errors.New("idemclient: Key needs a Header, or a body place (JSONPointer, FormField), not both")
	}
	if k.JSONPointer != "" && !strings.HasPrefix(k.JSONPointer, "/") {
		return fmt.Errorf("idemclient: Key.JSONPointer %q does not start with /", k.JSONPointer)
	}
	return nil
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Check returns an error when key breaks the protocol's rules (1 to 255 bytes of
// printable ASCII) or the constraints of k.
func (k Key) Check(key string) error {
	if key == "" || len(key) > MaxKeyBytes {
		return fmt.Errorf("idemclient: the idempotency key must be 1 to %d bytes, got %d", MaxKeyBytes, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("idemclient: the idempotency key %q: byte %d is not printable ASCII", key, i)
		}
	}
	n := utf8.RuneCountInString(key)
	if k.MinLength > 0 && n < k.MinLength {
		return fmt.Errorf("idemclient: the idempotency key %q is shorter than the spec's minLength %d", key, k.MinLength)
	}
	if k.MaxLength > 0 && n > k.MaxLength {
		return fmt.Errorf("idemclient: the idempotency key %q is longer than the spec's maxLength %d", key, k.MaxLength)
	}
	if k.Format == "uuid" && !uuidRE.MatchString(key) {
		return fmt.Errorf("idemclient: the idempotency key %q is not a UUID (the spec declares format uuid)", key)
	}
	if k.Pattern != "" {
		re, err := ecmaregexp.Compile(k.Pattern)
		if err != nil {
			return fmt.Errorf("idemclient: the key's pattern %q: %v", k.Pattern, err)
		}
		ok, err := re.Match(key)
		if err != nil {
			return fmt.Errorf("idemclient: the idempotency key %q against the spec's pattern %q: %v", key, k.Pattern, err)
		}
		if !ok {
			return fmt.Errorf("idemclient: the idempotency key %q does not match the spec's pattern %q", key, k.Pattern)
		}
	}
	return nil
}

// NewKey returns a random (version 4) UUID in lowercase 8-4-4-4-12 form, from
// crypto/rand: the default key of a call that brings none.
func NewKey() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10 (RFC 9562)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// mintFor adapts the default key to k: a UUID unless the spec's maxLength is shorter,
// then that many random hex characters.
func mintFor(k Key) (string, error) {
	if k.MaxLength > 0 && k.MaxLength < 36 && k.Format != "uuid" {
		b := make([]byte, (k.MaxLength+1)/2)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		return hex.EncodeToString(b)[:k.MaxLength], nil
	}
	return NewKey()
}

type ctxKey struct{}

// ContextWithKey returns a context carrying key: the calls made with it use key rather
// than minting one (a request or option that brings its own key wins). Give each
// logical call its own key: two calls with one key and different payloads are
// answered 422.
func ContextWithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, ctxKey{}, key)
}

// KeyFromContext returns the key ContextWithKey put in ctx, if any.
func KeyFromContext(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(ctxKey{}).(string)
	return k, ok && k != ""
}

// forBody returns k with the one body place the request's content type ct uses: the
// form field for a form, else the JSON pointer (when k has both).
func (k Key) forBody(ct string) Key {
	if k.JSONPointer == "" || k.FormField == "" {
		return k
	}
	if mt, _, _ := mime.ParseMediaType(ct); mt == "application/x-www-form-urlencoded" {
		k.JSONPointer = ""
	} else {
		k.FormField = ""
	}
	return k
}

// bodyKey reads the key a body already carries at k's place: a non-empty string.
func bodyKey(k Key, body []byte) (string, error) {
	switch {
	case k.JSONPointer != "":
		var doc any
		if err := decodeJSON(body, &doc); err != nil {
			return "", fmt.Errorf("idemclient: the request body is not JSON, so it cannot carry the key at %s: %w", k.JSONPointer, err)
		}
		v, _ := lookup(doc, pointerTokens(k.JSONPointer))
		if s, ok := v.(string); ok {
			return s, nil
		}
		return "", nil
	case k.FormField != "":
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return "", fmt.Errorf("idemclient: the request body is not a form, so it cannot carry the key in %s: %w", k.FormField, err)
		}
		return vals.Get(k.FormField), nil
	}
	return "", nil
}

// withBodyKey returns body with key at k's place (a JSON pointer or a form field).
// JSON is re-encoded (object members sorted, numbers kept as written); a form is
// re-encoded sorted by field, as url.Values.Encode does.
func withBodyKey(k Key, body []byte, key string) ([]byte, error) {
	if k.FormField != "" {
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, err
		}
		vals.Set(k.FormField, key)
		return []byte(vals.Encode()), nil
	}
	var doc any
	if len(bytes.TrimSpace(body)) == 0 {
		doc = map[string]any{}
	} else if err := decodeJSON(body, &doc); err != nil {
		return nil, err
	}
	doc, err := set(doc, pointerTokens(k.JSONPointer), key)
	if err != nil {
		return nil, fmt.Errorf("idemclient: setting the key at %s: %w", k.JSONPointer, err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func pointerTokens(p string) []string {
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return toks
}

func lookup(doc any, toks []string) (any, bool) {
	for _, t := range toks {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, false
		}
		if doc, ok = m[t]; !ok {
			return nil, false
		}
	}
	return doc, true
}

// set puts v at toks in doc, creating the objects on the way that are missing (or null).
func set(doc any, toks []string, v any) (any, error) {
	if len(toks) == 0 {
		return v, nil
	}
	if doc == nil {
		doc = map[string]any{}
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%q is not inside an object", toks[0])
	}
	child, err := set(m[toks[0]], toks[1:], v)
	if err != nil {
		return nil, err
	}
	m[toks[0]] = child
	return m, nil
}
