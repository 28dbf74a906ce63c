package idem

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
)

// A blank key, or one with a leading or trailing space, is a 400 problem in every form —
// quoted header, bare header, body field — before any SQL: the business never runs and no
// key row is written. (A bare header value's surrounding blanks are the field's optional
// whitespace, which net/http strips: bare "   " arrives empty.) A space inside a key is
// kept.
func TestBlankKeysRefused(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	var runs atomic.Int64
	fn := func(ctx context.Context, tx Tx) (*Response, error) {
		runs.Add(1)
		return insertOne("x")(ctx, tx)
	}
	header := e.serve(p, "", fn)
	body := e.serve(p, "/idempotency_key", fn)
	for _, tt := range []struct {
		name string
		got  func() answer
	}{
		{"quoted blank header", func() answer { return post(t, header, `{}`, `"   "`) }},
		{"quoted header, leading space", func() answer { return post(t, header, `{}`, `" abc"`) }},
		{"quoted header, trailing space", func() answer { return post(t, header, `{}`, `"abc "`) }},
		{"bare blank header", func() answer { return post(t, header, `{}`, "   ") }},
		{"blank body key", func() answer { return post(t, body, `{"idempotency_key":"   "}`) }},
		{"body key, leading space", func() answer { return post(t, body, `{"idempotency_key":" abc"}`) }},
		{"body key, trailing space", func() answer { return post(t, body, `{"idempotency_key":"abc "}`) }},
		{"body key, quoted blank", func() answer { return post(t, body, `{"idempotency_key":"\"   \""}`) }},
	} {
		if a := tt.got(); !a.isProblem(http.StatusBadRequest) {
			t.Errorf("%s: %d %s %q; want a 400 problem", tt.name, a.status, a.header.Get("Content-Type"), a.body)
		}
	}
	if runs.Load() != 0 || e.keyRows() != 0 || e.rows("") != 0 {
		t.Fatalf("business ran %d times, %d keys, %d rows; want 0, 0, 0", runs.Load(), e.keyRows(), e.rows(""))
	}
	if a := post(t, header, `{}`, `"a b"`); a.status != http.StatusCreated {
		t.Fatalf(`key "a b": %d %q; want 201`, a.status, a.body)
	}
	if a := post(t, body, `{"idempotency_key":"c d"}`); a.status != http.StatusCreated {
		t.Fatalf(`body key "c d": %d %q; want 201`, a.status, a.body)
	}
	if e.rows("WHERE key IN ('a b', 'c d')") != 2 {
		t.Fatalf("keys with an inner space: %d rows, want 2", e.rows("WHERE key IN ('a b', 'c d')"))
	}
}
