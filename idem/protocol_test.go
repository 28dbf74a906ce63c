package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// 1. 50 duplicates released together: one execution, the rest 409 or byte-identical replays.
func TestConcurrentDuplicatesOneKey(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	const n, rounds = 50, 20
	for round := range rounds {
		key := fmt.Sprintf("round-%d", round)
		resps := make([]*Response, n)
		errs := make([]error, n)
		release(n, func(i int) {
			resps[i], errs[i] = e.store.Do(context.Background(), p, ptr(key), parts("x"), insertOne("x"))
		})
		var executed, conflicts, replays int
		var first *Response
		for i, r := range resps {
			if errs[i] != nil {
				t.Fatalf("round %d: call %d: %v", round, i, errs[i])
			}
			switch r.Outcome {
			case OutcomeCompleted:
				executed++
				first = r
			case OutcomeInProgress:
				conflicts++
				if r.Status != http.StatusConflict || header(r, "Retry-After") == "" {
					t.Fatalf("in-progress answer: status %d, Retry-After %q", r.Status, header(r, "Retry-After"))
				}
			case OutcomeReplayed:
				replays++
			default:
				t.Fatalf("round %d: unexpected outcome %s", round, r.Outcome)
			}
		}
		if executed != 1 || conflicts+replays != n-1 {
			t.Fatalf("round %d: executed %d, 409 %d, replays %d; want exactly 1 execution", round, executed, conflicts, replays)
		}
		for _, r := range resps {
			if r.Outcome == OutcomeReplayed && (r.Status != first.Status || !bytes.Equal(r.Body, first.Body)) {
				t.Fatalf("replay %d %q differs from first %d %q", r.Status, r.Body, first.Status, first.Body)
			}
		}
		if got := e.rows("WHERE key = $1", key); got != 1 {
			t.Fatalf("round %d: %d business rows, want 1", round, got)
		}
		// After completion every retry replays the same bytes.
		again := e.do(p, key, "x", insertOne("x"))
		if again.Outcome != OutcomeReplayed || !bytes.Equal(again.Body, first.Body) || header(again, "Location") != header(first, "Location") {
			t.Fatalf("retry after completion: %s %q, want replay of %q", again.Outcome, again.Body, first.Body)
		}
	}
	if got := e.count(OutcomeCompleted); got != rounds {
		t.Fatalf("%d completed outcomes, want %d", got, rounds)
	}
}

// 2. 500 keys × 8 duplicates, interleaved, on 16 workers: exactly 500 business rows.
func TestManyKeysInterleaved(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	const keys, dups, workers = 500, 8, 16
	jobs := make(chan int, keys*dups)
	for d := 0; d < dups; d++ {
		for k := 0; k < keys; k++ {
			jobs <- k
		}
	}
	close(jobs)
	var failures atomic.Int64
	release(workers, func(int) {
		for k := range jobs {
			payload := strconv.Itoa(k)
			r, err := e.store.Do(context.Background(), p, ptr("key-"+payload), parts(payload), insertOne(payload))
			if err != nil || (r.Outcome != OutcomeCompleted && r.Outcome != OutcomeReplayed && r.Outcome != OutcomeInProgress) {
				failures.Add(1)
			}
		}
	})
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d calls failed", f)
	}
	if got := e.rows(""); got != keys {
		t.Fatalf("%d business rows, want %d", got, keys)
	}
	if got := e.rows("WHERE key IN (SELECT key FROM business GROUP BY key HAVING count(*) > 1)"); got != 0 {
		t.Fatalf("keys with more than one business row: %d", got)
	}
	if got := e.count(OutcomeCompleted); got != keys {
		t.Fatalf("%d completed outcomes, want %d", got, keys)
	}
}

// 3. A business error commits nothing and releases the key: the next call executes.
func TestBusinessErrorReleases(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	failing := func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := insertOne("x")(ctx, tx); err != nil {
			return nil, err
		}
		return nil, errBusiness
	}
	if _, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), failing); !errors.Is(err, errBusiness) {
		t.Fatalf("err = %v, want the business error", err)
	}
	if e.rows("") != 0 || e.keyRows() != 0 {
		t.Fatalf("after a business error: %d business rows, %d keys; want 0, 0", e.rows(""), e.keyRows())
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
}

// A 5xx answer is not stored: rolled back, released, and the retry runs.
func TestServerErrorNotStored(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	unavailable := func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := insertOne("x")(ctx, tx); err != nil {
			return nil, err
		}
		return &Response{Status: http.StatusServiceUnavailable, Body: []byte("try later")}, nil
	}
	if r := e.do(p, "k", "x", unavailable); r.Outcome != OutcomeNotStored || r.Status != 503 {
		t.Fatalf("got %s %d, want not_stored 503", r.Outcome, r.Status)
	}
	if e.rows("") != 0 || e.keyRows() != 0 {
		t.Fatal("a 5xx left rows behind")
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s", r.Outcome)
	}
}

// 7. Mismatches and scopes.
func TestMismatchAndScopes(t *testing.T) {
	type scopeKey struct{}
	e := newEnv(t, WithScope(func(ctx context.Context) (string, error) {
		s, _ := ctx.Value(scopeKey{}).(string)
		return s, nil
	}))
	p := policy("createThing")
	ctxA := context.WithValue(context.Background(), scopeKey{}, "acct-a")
	ctxB := context.WithValue(context.Background(), scopeKey{}, "acct-b")
	first, err := e.store.Do(ctxA, p, ptr("k"), parts("x"), insertOne("x"))
	if err != nil || first.Outcome != OutcomeCompleted {
		t.Fatal(first, err)
	}
	other, _ := e.store.Do(ctxA, p, ptr("k"), parts("y"), insertOne("y"))
	if other.Status != http.StatusUnprocessableEntity || header(other, "Content-Type") != "application/problem+json" {
		t.Fatalf("different payload: %d %s", other.Status, header(other, "Content-Type"))
	}
	otherOp, _ := e.store.Do(ctxA, policy("createOther"), ptr("k"), parts("x"), insertOne("x"))
	if otherOp.Status != http.StatusUnprocessableEntity || !bytes.Contains(otherOp.Body, []byte("createThing")) {
		t.Fatalf("different operation: %d %s", otherOp.Status, otherOp.Body)
	}
	inB, _ := e.store.Do(ctxB, p, ptr("k"), parts("x"), insertOne("x"))
	if inB.Outcome != OutcomeCompleted {
		t.Fatalf("same key in another scope: %s, want completed", inB.Outcome)
	}
	if e.rows("") != 2 || e.rows("WHERE scope = 'acct-b'") != 1 {
		t.Fatalf("rows: %d", e.rows(""))
	}
	if e.count(OutcomeMismatch) != 2 {
		t.Fatalf("mismatch outcomes %d, want 2", e.count(OutcomeMismatch))
	}
}

// 8. Past retention, a completed key is free again.
func TestRetentionExpiry(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Lease, p.Retention = 300*time.Millisecond, 300*time.Millisecond // retention ≥ lease
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatal(r.Outcome)
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeReplayed {
		t.Fatalf("within retention: %s", r.Outcome)
	}
	e.waitFor("expires_at <= now() FROM idempotency_keys WHERE key = 'k'")
	if r := e.do(p, "k", "y", insertOne("y")); r.Outcome != OutcomeCompleted {
		t.Fatalf("past retention: %s, want completed", r.Outcome)
	}
	if e.rows("") != 2 || e.count(OutcomeTakenOver) != 1 {
		t.Fatalf("rows %d, taken over %d", e.rows(""), e.count(OutcomeTakenOver))
	}
	e.waitFor("expires_at <= now() FROM idempotency_keys WHERE key = 'k'")
	if n, err := e.store.Purge(context.Background(), 10); err != nil || n != 1 || e.keyRows() != 0 {
		t.Fatalf("purge: %d %v, %d rows left", n, err, e.keyRows())
	}
}

// A key is checked before any SQL; a missing required key is 400; an optional one runs plain.
func TestMissingAndInvalidKey(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	r, err := e.store.Do(context.Background(), p, nil, parts("x"), insertOne("x"))
	if err != nil || r.Status != http.StatusBadRequest || r.Outcome != OutcomeMissingKey {
		t.Fatalf("missing key: %+v %v", r, err)
	}
	r, _ = e.store.Do(context.Background(), p, ptr("bad\x00key"), parts("x"), insertOne("x"))
	if r.Status != http.StatusBadRequest || r.Outcome != OutcomeInvalidKey || e.keyRows() != 0 {
		t.Fatalf("invalid key: %+v", r)
	}
	optional := policy("createThing")
	optional.KeyRequired = false
	for range 2 {
		r, _ = e.store.Do(context.Background(), optional, nil, parts("x"), insertOne("x"))
		if r.Outcome != OutcomeUnkeyed || r.Status != http.StatusCreated {
			t.Fatalf("optional key: %+v", r)
		}
	}
	if e.rows("") != 2 || e.keyRows() != 0 {
		t.Fatalf("unkeyed calls: %d rows, %d keys; want 2, 0", e.rows(""), e.keyRows())
	}
}

// Serialization failures are retried while the claim is ours.
func TestSerializationFailureRetried(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	var calls atomic.Int64
	flaky := func(ctx context.Context, tx Tx) (*Response, error) {
		if calls.Add(1) == 1 {
			if _, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'conflict'; END $$`); err != nil {
				return nil, err
			}
		}
		return insertOne("x")(ctx, tx)
	}
	if r := e.do(p, "k", "x", flaky); r.Outcome != OutcomeCompleted {
		t.Fatalf("%s", r.Outcome)
	}
	if calls.Load() != 2 || e.rows("") != 1 || e.count(OutcomeRetried) != 1 {
		t.Fatalf("calls %d rows %d retried %d; want 2, 1, 1", calls.Load(), e.rows(""), e.count(OutcomeRetried))
	}
}

// Stored headers replay intact (commas included); Set-Cookie is never stored.
func TestReplayHeaders(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	fn := func(ctx context.Context, tx Tx) (*Response, error) {
		return Record(func(w http.ResponseWriter) error {
			w.Header().Set("Set-Cookie", "session=secret")
			w.Header().Set("Link", `</a>; rel="next", </b>; rel="last"`)
			w.Header().Add("X-Multi", "one")
			w.Header().Add("X-Multi", "two")
			w.WriteHeader(http.StatusCreated)
			_, err := w.Write([]byte("{}"))
			return err
		})
	}
	if first := e.do(p, "k", "x", fn); header(first, "Set-Cookie") != "session=secret" {
		t.Fatalf("the executed answer lost its Set-Cookie: %+v", first.Header)
	}
	r := e.do(p, "k", "x", fn)
	if r.Outcome != OutcomeReplayed || header(r, "Set-Cookie") != "" ||
		header(r, "Link") != `</a>; rel="next", </b>; rel="last"` {
		t.Fatalf("replayed headers: %+v", r.Header)
	}
	var multi []string
	for _, l := range r.Header {
		if l.Name == "X-Multi" {
			multi = append(multi, l.Value)
		}
	}
	if fmt.Sprint(multi) != "[one two]" {
		t.Fatalf("X-Multi replayed as %v", multi)
	}
}

func TestRepeatedPayloads(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	for _, k := range []string{"a", "b", "c"} {
		e.do(p, k, "same", insertOne("same"))
	}
	e.do(p, "d", "other", insertOne("other"))
	got, err := e.store.RepeatedPayloads(context.Background(), time.Hour, 10)
	if err != nil || len(got) != 1 || got[0].Keys != 3 || got[0].Operation != "createThing" {
		t.Fatalf("RepeatedPayloads = %+v, %v", got, err)
	}
}

func header(r *Response, name string) string {
	for _, l := range r.Header {
		if http.CanonicalHeaderKey(l.Name) == http.CanonicalHeaderKey(name) {
			return l.Value
		}
	}
	return ""
}
