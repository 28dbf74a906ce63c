package idemredis

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
)

// counts is an idem.Observer that counts outcomes.
type counts struct {
	mu sync.Mutex
	n  map[idem.Outcome]int
}

func (c *counts) observe(_ string, o idem.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[idem.Outcome]int{}
	}
	c.n[o]++
}

func (c *counts) get(o idem.Outcome) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[o]
}

func (c *counts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.n)
}

// env is a store on a throwaway redis-server.
type env struct {
	srv   *redistest.Server
	rdb   *redis.Client
	store *Store
	seen  *counts
}

// newEnv starts a redis-server (extra args in its command-line form) and a store on it.
func newEnv(t *testing.T, serverArgs []string, opts ...Option) *env {
	t.Helper()
	srv := redistest.Start(t, serverArgs...)
	rdb := clientFor(t, srv.Addr())
	seen := &counts{}
	opts = append([]Option{WithObserver(seen.observe), WithLogger(quietLogger(t))}, opts...)
	store, err := New(context.Background(), rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &env{srv: srv, rdb: rdb, store: store, seen: seen}
}

// clientFor is a client of the server at addr, closed when t ends.
func clientFor(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // a test of faults sees each failure as it happens
		DialTimeout:           time.Second,
		PoolSize:              32,
	})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// textLogger logs to w.
func textLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// quietLogger logs through t.Log.
func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

var testPolicy = idem.MustPolicy(idem.Policy{
	Operation:   "starPayment",
	KeySource:   "header Idempotency-Key",
	KeyRequired: true,
	Lease:       5 * time.Second,
	Retention:   time.Hour,
})

func ptr(s string) *string { return &s }

func body(id string) []idem.Part {
	return []idem.Part{{Name: "body", Value: map[string]any{"payment": id}}}
}

// created is a business function's answer: 201 with a JSON body and a few headers.
func created(n int) *idem.Response {
	return &idem.Response{
		Status: http.StatusCreated,
		Header: []idem.HeaderLine{
			{Name: "Content-Type", Value: "application/json"},
			{Name: "Location", Value: fmt.Sprintf("/stars/%d", n)},
			{Name: "Set-Cookie", Value: "session=mine"},
		},
		Body: fmt.Appendf(nil, "{\"star\": %d,  \"note\":\"kept byte for byte\"}\n", n),
	}
}

// written is what resp.WriteTo sends.
func written(t *testing.T, resp *idem.Response) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := resp.WriteTo(rec); err != nil {
		t.Fatal(err)
	}
	return rec.Result()
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
