package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
)

// A response body past the store's cap fails the call closed, however the business built
// it: an error wrapping ErrResponseTooLarge, the business rolled back, the claim released
// (no partial body stored), and the same key then executes. A body of exactly the cap is
// stored and replayed.
func TestResponseOverCapFailsClosed(t *testing.T) {
	const max = 1024
	e := newEnv(t, WithMaxResponseBytes(max))
	p := policy("createThing")
	chunk := bytes.Repeat([]byte("y"), 100)
	var streamStopped atomic.Bool // the endless stream saw ErrResponseTooLarge from Write
	producers := []struct {
		name  string
		visit func(w http.ResponseWriter) error
		// pkg records with the package-level Record (default cap, 1 MiB), not Store.Record.
		pkg bool
	}{
		{name: "one write past the cap", visit: func(w http.ResponseWriter) error {
			_, err := w.Write(make([]byte, max+1))
			return err
		}},
		{name: "a stream that never ends", visit: func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "text/event-stream")
			for range 1 << 20 { // 100 MiB: "never" for this cap; a guard should the cap be broken
				if _, err := w.Write(chunk); err != nil {
					streamStopped.Store(errors.Is(err, ErrResponseTooLarge))
					return err
				}
			}
			return nil
		}},
		{name: "a visit that ignores the write error", visit: func(w http.ResponseWriter) error {
			for range 20 {
				_, _ = w.Write(chunk)
			}
			return nil
		}},
		{name: "package-level Record, over the store's cap", pkg: true, visit: func(w http.ResponseWriter) error {
			_, err := w.Write(make([]byte, max+1))
			return err
		}},
	}
	for i, pr := range producers {
		key := fmt.Sprintf("k%d", i)
		fn := func(ctx context.Context, tx Tx) (*Response, error) {
			if _, err := insertOne("x")(ctx, tx); err != nil {
				return nil, err
			}
			if pr.pkg {
				return Record(pr.visit)
			}
			return e.store.Record(pr.visit)
		}
		r, err := e.store.Do(context.Background(), p, ptr(key), parts("x"), fn)
		if !errors.Is(err, ErrResponseTooLarge) {
			t.Fatalf("%s: Do = %+v, %v; want ErrResponseTooLarge", pr.name, r, err)
		}
		if e.rows("") != 0 || e.keyRows() != 0 || e.count(OutcomeFailed) != i+1 {
			t.Fatalf("%s: %d rows, %d keys, failed %d; want 0, 0, %d", pr.name, e.rows(""), e.keyRows(), e.count(OutcomeFailed), i+1)
		}
	}
	if !streamStopped.Load() {
		t.Fatal("the endless stream's Write never failed with ErrResponseTooLarge")
	}
	// A hand-built response is held to the cap too.
	big := func(context.Context, Tx) (*Response, error) {
		return &Response{Status: http.StatusOK, Body: make([]byte, max+1)}, nil
	}
	if _, err := e.store.Do(context.Background(), p, ptr("k-hand"), parts("x"), big); !errors.Is(err, ErrResponseTooLarge) || e.keyRows() != 0 {
		t.Fatalf("hand-built response over the cap: %v, %d keys; want ErrResponseTooLarge, 0", err, e.keyRows())
	}
	// Over HTTP the client gets a 500 problem; the same key then runs, with exactly max bytes.
	var calls atomic.Int64
	srv := e.serve(p, "", func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := insertOne("x")(ctx, tx); err != nil {
			return nil, err
		}
		n := max + 2 - calls.Add(1) // max+1, then max
		return e.store.Record(func(w http.ResponseWriter) error {
			_, err := w.Write(bytes.Repeat([]byte("z"), int(n)))
			return err
		})
	})
	if a := post(t, srv, `{}`, "k-http"); !a.isProblem(http.StatusInternalServerError) || e.keyRows() != 0 || e.rows("") != 0 {
		t.Fatalf("over the cap over HTTP: %d %q, %d keys, %d rows; want a 500 problem, 0, 0", a.status, a.body, e.keyRows(), e.rows(""))
	}
	first := post(t, srv, `{}`, "k-http")
	replay := post(t, srv, `{}`, "k-http")
	if first.status != http.StatusOK || len(first.body) != max || !bytes.Equal(replay.body, first.body) || replay.header.Get(ReplayedHeader) != "true" {
		t.Fatalf("exactly the cap: %d, %d bytes, replay %d bytes (%q); want 200, %d, identical, replayed", first.status, len(first.body), len(replay.body), replay.header.Get(ReplayedHeader), max)
	}
}

// Binary bodies up to the default cap replay byte for byte over HTTP (every byte value, NUL
// and invalid UTF-8 included); one byte more is a 500 and nothing is stored.
func TestBinaryResponseReplaysByteIdentical(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	want := make([]byte, DefaultMaxResponseBytes)
	for i := range 256 {
		want[i] = byte(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 256; i < len(want); i++ {
		want[i] = byte(rng.Uint32())
	}
	binary := func(body []byte) Func {
		return func(ctx context.Context, tx Tx) (*Response, error) {
			if _, err := insertOne("x")(ctx, tx); err != nil {
				return nil, err
			}
			return e.store.Record(func(w http.ResponseWriter) error {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.WriteHeader(http.StatusCreated)
				_, err := w.Write(body)
				return err
			})
		}
	}
	srv := e.serve(p, "", binary(want))
	for i := range 2 {
		a := post(t, srv, `{}`, "k")
		if a.status != http.StatusCreated || a.header.Get("Content-Type") != "application/octet-stream" || !bytes.Equal(a.body, want) {
			t.Fatalf("answer %d: %d %q, %d bytes, identical %v; want 201 octet-stream, the %d bytes", i, a.status, a.header.Get("Content-Type"), len(a.body), bytes.Equal(a.body, want), len(want))
		}
		if replayed := a.header.Get(ReplayedHeader) == "true"; replayed != (i == 1) {
			t.Fatalf("answer %d: replayed %v", i, replayed)
		}
	}
	over := e.serve(p, "", binary(append(want, 0)))
	if a := post(t, over, `{}`, "k-over"); !a.isProblem(http.StatusInternalServerError) || e.keyRows() != 1 || e.rows("") != 1 {
		t.Fatalf("one byte over the default cap: %d, %d keys, %d rows; want a 500 problem, 1, 1", a.status, e.keyRows(), e.rows(""))
	}
}

// The package-level Record caps at DefaultMaxResponseBytes: an endless writer ends.
func TestRecordDefaultCap(t *testing.T) {
	chunk := make([]byte, 4096)
	var written int64
	_, err := Record(func(w http.ResponseWriter) error {
		for range 64 * DefaultMaxResponseBytes / int64(len(chunk)) { // a guard should the cap be broken
			n, err := w.Write(chunk)
			written += int64(n)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrResponseTooLarge) || written != DefaultMaxResponseBytes {
		t.Fatalf("endless writer: %v after %d bytes; want ErrResponseTooLarge after %d", err, written, DefaultMaxResponseBytes)
	}
}
