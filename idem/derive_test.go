package idem

import (
	"testing"
)

// A derived key is the same for the same scope, key and name (every retry of a request
// derives the one key), different when any of them differs (including splits of the same
// bytes between scope and key), and a lowercase version 8 UUID that a downstream spec's
// format: uuid accepts.
func TestDerivedKeys(t *testing.T) {
	k := KeyInfo{Scope: "acct_1", Key: "pay-1"}
	charge := k.Derive("charge")
	if again := (KeyInfo{Scope: "acct_1", Key: "pay-1"}).Derive("charge"); again != charge {
		t.Fatalf("the same request derived %q, then %q", charge, again)
	}
	seen := map[string]string{charge: "acct_1/pay-1/charge"}
	for _, c := range []struct {
		k    KeyInfo
		name string
	}{
		{k, "refund"},
		{KeyInfo{Scope: "acct_1", Key: "pay-2"}, "charge"},
		{KeyInfo{Scope: "acct_2", Key: "pay-1"}, "charge"},
		{KeyInfo{Scope: "acct_1p", Key: "ay-1"}, "charge"},  // the same bytes, split otherwise
		{KeyInfo{Scope: "acct_1", Key: "pay-1c"}, "harge"},  // between key and name
		{KeyInfo{Scope: "", Key: "acct_1pay-1"}, "charge"},  // no scope
		{KeyInfo{Scope: "acct_1", Key: "pay-1"}, "charge "}, // a byte more
	} {
		d := c.k.Derive(c.name)
		what := c.k.Scope + "/" + c.k.Key + "/" + c.name
		if prev, dup := seen[d]; dup {
			t.Errorf("%s derives %s, as %s does", what, d, prev)
		}
		seen[d] = what
	}
	schema := &KeySchema{Format: "uuid"}
	for d, what := range seen {
		if len(d) != 36 || d[14] != '8' || (d[19] != '8' && d[19] != '9' && d[19] != 'a' && d[19] != 'b') {
			t.Errorf("%s: %q is not a version 8 UUID", what, d)
		}
		if _, err := ParseKey(d); err != nil {
			t.Errorf("%s: %q is not a valid key: %v", what, d, err)
		}
		if got, err := schema.Canonical(d); err != nil || got != d {
			t.Errorf("%s: %q under format uuid: %q, %v; want it unchanged (lowercase)", what, d, got, err)
		}
	}
}
