package idem

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/idemgen/idemgen/internal/ecmaregexp"
)

// KeySchema is what an operation's spec declares about the value of its idempotency key
// (the string schema of the key header, or of the body property holding it). [Store.Do]
// checks a key against it after [ParseKey] and before any SQL, answers a key that breaks
// it with a 400 problem naming the rule, and uses a key it accepts in its canonical form
// ([KeySchema.Canonical]). The zero value constrains nothing.
type KeySchema struct {
	// MinLength and MaxLength bound the key's length in characters (a key is ASCII, so
	// bytes); 0 means no bound. MaxKeyLen applies whatever MaxLength says.
	MinLength int
	MaxLength int
	// Pattern is the schema's regular expression, unanchored as in JSON Schema, in
	// ECMA-262 syntax as OpenAPI defines it (lookahead such as ^(?!\s)(.*)(\S)$
	// included), matched by a backtracking engine (github.com/dlclark/regexp2) within
	// 100ms: a key whose match takes longer is refused as not matching.
	Pattern string
	// Format "uuid" requires the RFC 9562 text form (8-4-4-4-12 hex digits, any case), and
	// the key is that uuid in lowercase: one uuid in any case is one idempotency key. That
	// is the text oapi-codegen's uuid type gives (a key header under -base=external, a
	// body key in every base), so every way a uuid key arrives agrees. Other formats are
	// not checked.
	Format string

	once sync.Once
	re   *ecmaregexp.Regexp
	err  error
}

var uuidForm = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Check returns nil when key satisfies k, else an error wrapping [ErrInvalidKey] that names
// the rule. A nil k accepts every key. An error that wraps [ErrInvalidPattern] is k's
// own: its Pattern does not compile.
func (k *KeySchema) Check(key string) error {
	if k == nil {
		return nil
	}
	n := len(key)
	switch {
	case k.MinLength > 0 && n < k.MinLength:
		return fmt.Errorf("%w: %d characters, shorter than the minLength of %d", ErrInvalidKey, n, k.MinLength)
	case k.MaxLength > 0 && n > k.MaxLength:
		return fmt.Errorf("%w: %d characters, longer than the maxLength of %d", ErrInvalidKey, n, k.MaxLength)
	case k.Format == "uuid" && !uuidForm.MatchString(key):
		return fmt.Errorf("%w: not a UUID (format uuid: 8-4-4-4-12 hex digits)", ErrInvalidKey)
	}
	if k.Pattern == "" {
		return nil
	}
	if err := k.compile(); err != nil {
		return fmt.Errorf("%w: %q: %v", ErrInvalidPattern, k.Pattern, err)
	}
	switch ok, err := k.re.Match(key); {
	case err != nil:
		return fmt.Errorf("%w: matching the pattern %q: %v", ErrInvalidKey, k.Pattern, err)
	case !ok:
		return fmt.Errorf("%w: does not match the pattern %q", ErrInvalidKey, k.Pattern)
	}
	return nil
}

// Canonical checks key like [KeySchema.Check] and returns the idempotency key the protocol
// uses (stored, compared, handed to the business function by [KeyFromContext]): under
// Format "uuid" the key's canonical form, lowercase 8-4-4-4-12, so that one uuid in
// any case is one key (the form oapi-codegen's uuid type gives the key under
// -base=external); otherwise key as it is. The rules are checked on key as received.
func (k *KeySchema) Canonical(key string) (string, error) {
	if err := k.Check(key); err != nil {
		return "", err
	}
	if k != nil && k.Format == "uuid" {
		return strings.ToLower(key), nil // no allocation when key is lowercase already
	}
	return key, nil
}

// compile compiles Pattern once; nil when there is none.
func (k *KeySchema) compile() error {
	if k.Pattern == "" {
		return nil
	}
	k.once.Do(func() { k.re, k.err = ecmaregexp.Compile(k.Pattern) })
	return k.err
}

// ErrInvalidPattern is wrapped by the error of a [KeySchema] whose Pattern does not compile.
var ErrInvalidPattern = fmt.Errorf("idem: invalid key pattern")
