package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The demo, scaled down, on a pgtest database: it passes and says so.
func TestDemo(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.NewDB(t))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-no-generate", "-delay", "100ms",
		"-duplicates", "20", "-retries", "5", "-keys", "20", "-per-key", "5", "-late-retries", "2", "-c", "20", "-client-calls", "30"}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	out := stdout.String()
	// Phase 1: 25 requests, one execution, one row (how the other 24 split between 409
	// and replay depends on timing: the 5 retries always replay).
	if !regexp.MustCompile(`(?m)^1\. one key: 20 duplicates at once, then 5 retries +25 +1 +\d+ +\d+ +0 +1$`).MatchString(out) {
		t.Errorf("phase 1 row missing or wrong")
	}
	for _, want := range []string{
		"createPayment: 51 created keys, 51 payments rows; 0 keys without a row, 0 rows without a key, 0 keys with several rows: OK",
		"4. 30 payments through the generated client, lossy network (api.IdempotentClient, one key per call):\n  30 of 30 calls answered 201 in ",
		"; 30 payments created\n",
		"195 requests, 51 payments: a payment was never created twice.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	// The stars, on a throwaway redis-server: one star per key.
	if _, err := redistest.Binary(); err != nil && os.Getenv("CI") != "true" {
		t.Skipf("no redis-server: the stars part was skipped (%v)", err)
	}
	if !regexp.MustCompile(`(?m)^5\. one star key: 20 duplicates at once, then 5 retries +25 +1 +\d+ +\d+ +0$`).MatchString(out) ||
		!strings.Contains(out, "stars counted in PostgreSQL: 21, for 21 keys") {
		t.Errorf("the stars part is missing or wrong")
	}
}

// Against an endpoint that is not idempotent (every request inserts a payment), the demo
// fails: duplicate executions, rows off, audit failed.
func TestDemoDetectsDuplicates(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if err := service.Setup(ctx, pool); err != nil {
		t.Fatal(err)
	}
	naive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := pool.Exec(r.Context(), `INSERT INTO payments (account_id, amount, currency, idempotency_scope, idempotency_key)
			VALUES ($1, 1999, 'EUR', $1, $2)`, r.Header.Get(service.AccountHeader), r.Header.Get("Idempotency-Key"))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{}`))
	}))
	defer naive.Close()
	c := config{duplicates: 5, retries: 0, keys: 3, perKey: 2, retriesLate: 0, concurrency: 10}
	var stdout, stderr bytes.Buffer
	if demo(ctx, c, naive.URL, pool, &stdout, &stderr, t.Logf) {
		t.Fatalf("the demo passed a non-idempotent endpoint:\n%s", &stdout)
	}
	out := stdout.String()
	t.Logf("stdout:\n%s", out)
	for _, want := range []string{"FAIL: 1. one key", "5 payments created, want 1", "FAILED", "createPayment: 0 created keys, 11 payments rows"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(out, "never created twice") {
		t.Error("claims success")
	}
}

// Without a redis-server the demo says so in one short line, with how to install one, and
// runs without its Redis part.
func TestNoRedisServerIsOneShortLine(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("REDIS_SERVER", "")
	t.Setenv("PATH", t.TempDir()) // no redis-server on it
	var lines []string
	store, stop := redisStore(context.Background(), func(format string, args ...any) {
		lines = append(lines, "demo: "+fmt.Sprintf(format, args...))
	})
	defer stop()
	want := "demo: no redis-server (apt-get install redis-server, or set REDIS_ADDR): skipping the Redis part (starPayment)"
	if store != nil || len(lines) != 1 || lines[0] != want {
		t.Errorf("store %v, lines %q; want no store and the one line %q", store, lines, want)
	}
}
