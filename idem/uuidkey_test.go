package idem

import (
	"context"
	"strings"
	"testing"

	openapi_types "github.com/oapi-codegen/runtime/types"
)

const (
	uuidLower = "0b6f3a39-8c7e-4f7a-9d55-6a1f2d9e4c11"
	uuidUpper = "0B6F3A39-8C7E-4F7A-9D55-6A1F2D9E4C11"
	uuidMixed = "0b6F3a39-8C7e-4f7A-9d55-6A1f2D9e4C11"
)

// Under a key schema of format uuid, one uuid in any case is one idempotency key, in its
// canonical form (lowercase 8-4-4-4-12): the key idemgen's own base hands Do as a plain
// string and the one -base=external hands it (oapi-codegen's uuid type through
// StringKey) are the same. The business function sees the canonical key.
func TestUUIDKeyCanonical(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.KeySchema = &KeySchema{Format: "uuid"}
	var seen []string
	fn := func(ctx context.Context, tx Tx) (*Response, error) {
		k, _ := KeyFromContext(ctx)
		seen = append(seen, k.Key)
		return insertOne("x")(ctx, tx)
	}
	first := e.do(p, uuidUpper, "x", fn)
	if first.Outcome != OutcomeCompleted {
		t.Fatalf("first (uppercase): %s, want completed", first.Outcome)
	}
	for _, raw := range []string{uuidLower, uuidMixed, `"` + uuidUpper + `"`, external(t, uuidUpper)} {
		again := e.do(p, raw, "x", fn)
		if again.Outcome != OutcomeReplayed || string(again.Body) != string(first.Body) {
			t.Errorf("%s: %s %s, want a replay of %s", raw, again.Outcome, again.Body, first.Body)
		}
	}
	if len(seen) != 1 || seen[0] != uuidLower {
		t.Errorf("the business function saw keys %q, want one run with %q", seen, uuidLower)
	}
	if n := e.int(`SELECT count(*) FROM idempotency_keys WHERE key = $1`, uuidLower); n != 1 || e.keyRows() != 1 {
		t.Errorf("%d stored keys %q of %d, want the one key, lowercase", n, uuidLower, e.keyRows())
	}

	// Without format uuid a key is taken as it is: case matters.
	plain := policy("createOther")
	e.do(plain, "Key-A", "x", insertOne("x"))
	if r := e.do(plain, "key-a", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Errorf("key-a after Key-A without format uuid: %s, want completed (another key)", r.Outcome)
	}
}

// external is the key -base=external's generated code hands Do for the header value raw:
// oapi-codegen's runtime decodes the header into its uuid type (as a TextUnmarshaler),
// and StringKey writes it back as text.
func external(t *testing.T, raw string) string {
	t.Helper()
	var u openapi_types.UUID
	if err := u.UnmarshalText([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	return *StringKey(&u)
}

func TestKeySchemaCanonical(t *testing.T) {
	uuid := &KeySchema{Format: "uuid"}
	for _, c := range []struct {
		schema   *KeySchema
		key, out string
	}{
		{uuid, uuidUpper, uuidLower},
		{uuid, uuidMixed, uuidLower},
		{uuid, uuidLower, uuidLower},
		{nil, uuidUpper, uuidUpper},
		{&KeySchema{}, "Key-A", "Key-A"},
		{&KeySchema{Format: "date-time"}, "Key-A", "Key-A"},
		{&KeySchema{Format: "uuid", Pattern: "^[0-9A-F-]+$"}, uuidUpper, uuidLower}, // checked as received
	} {
		got, err := c.schema.Canonical(c.key)
		if err != nil || got != c.out {
			t.Errorf("%+v.Canonical(%q) = %q, %v; want %q", c.schema, c.key, got, err, c.out)
		}
		if c.schema == nil || c.schema.Format != "uuid" {
			continue
		}
		if ext := external(t, c.key); ext != got {
			t.Errorf("oapi-codegen's uuid type makes %q of %q, Canonical %q", ext, c.key, got)
		}
	}
	if _, err := uuid.Canonical(strings.ToUpper("not-a-uuid")); err == nil {
		t.Error("Canonical accepted a key that breaks the schema")
	}
}
