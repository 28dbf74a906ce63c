package idem

import (
	"errors"
	"strings"
	"testing"
)

func TestKeySchemaCheck(t *testing.T) {
	for _, c := range []struct {
		name   string
		schema *KeySchema
		key    string
		rule   string // "" when the key passes
	}{
		{"nil accepts", nil, "anything", ""},
		{"zero accepts", &KeySchema{}, "anything", ""},
		{"minLength", &KeySchema{MinLength: 8}, "short", "minLength of 8"},
		{"minLength met", &KeySchema{MinLength: 5}, "short", ""},
		{"maxLength", &KeySchema{MaxLength: 4}, "toolong", "maxLength of 4"},
		{"uuid", &KeySchema{Format: "uuid"}, "0B6F3A39-8C7E-4F7A-9D55-6A1F2D9E4C11", ""},
		{"not a uuid", &KeySchema{Format: "uuid"}, "0b6f3a398c7e4f7a9d556a1f2d9e4c11", "format uuid"},
		{"uuid with braces", &KeySchema{Format: "uuid"}, "{0b6f3a39-8c7e-4f7a-9d55-6a1f2d9e4c11}", "format uuid"},
		{"other formats unchecked", &KeySchema{Format: "date-time"}, "not a date", ""},
		{"pattern unanchored", &KeySchema{Pattern: "[0-9]"}, "abc1", ""},
		{"pattern", &KeySchema{Pattern: "^[a-z]+$"}, "abc-1", `pattern "^[a-z]+$"`},
		// ECMA-262, as OpenAPI defines patterns: a lookahead RE2 cannot compile.
		{"ecma lookahead", &KeySchema{Pattern: `^(?!\s)(.*)(\S)$`}, "order-1", ""},
		{"ecma lookahead refuses", &KeySchema{Pattern: `^(?!\s)(.*)(\S)$`}, "order-1 ", `pattern "^(?!\\s)(.*)(\\S)$"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.schema.Check(c.key)
			switch {
			case c.rule == "" && err != nil:
				t.Errorf("Check(%q) = %v, want nil", c.key, err)
			case c.rule != "" && (!errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), c.rule)):
				t.Errorf("Check(%q) = %v, want an ErrInvalidKey naming %q", c.key, err, c.rule)
			}
		})
	}
	bad := &KeySchema{Pattern: "(?!x"}
	if err := bad.Check("k"); !errors.Is(err, ErrInvalidPattern) || errors.Is(err, ErrInvalidKey) {
		t.Errorf("a pattern that does not compile: %v, want ErrInvalidPattern (the policy's fault, not the key's)", err)
	}
}
