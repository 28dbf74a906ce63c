package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/idem/idemredis/redistest"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// The server is killed (SIGKILL) while a star (store: redis, lease 5s) is inside its
// business: nothing was counted, and the claim stays in Redis. A retry on a second
// server gets 409 with Retry-After while the lease runs; once Redis has expired the
// claim, the retry runs once (one star), and the next one replays it.
func TestKillMidBusinessRedisStore(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the server and waits out a 5s lease")
	}
	rsrv := redistest.Start(t)
	t.Setenv("REDIS_ADDR", rsrv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: rsrv.Addr()})
	defer rdb.Close()
	url := pgtest.NewDB(t)
	bin := buildServer(t)
	victim := start(t, bin, url, "-addr", "127.0.0.1:0", "-star-delay", "60s")
	other := start(t, bin, url, "-addr", "127.0.0.1:0")
	ctx := context.Background()

	status, _, body := post(t, other.url+"/payments", "acct_1", "pay-1", `{"amount":1999,"currency":"EUR"}`)
	if status != http.StatusCreated {
		t.Fatalf("create payment: %d %s", status, body)
	}
	var p struct{ ID string }
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	starURL := func(base string) string { return base + "/payments/" + p.ID + "/star" }
	claims := func() int {
		keys, err := rdb.Keys(ctx, "idem:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}

	inflight := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("POST", starURL(victim.url), nil)
		req.Header.Set("X-Account-ID", "acct_1")
		req.Header.Set("Idempotency-Key", "star-1")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		inflight <- err
	}()
	waitUntil(t, "the victim's claim is in Redis", func() bool { return claims() == 1 })
	victim.cmd.Process.Kill() // SIGKILL
	<-victim.done
	if err := <-inflight; err == nil {
		t.Error("the request in flight on the killed server was answered")
	}
	if n := stars(t, url, p.ID); n != 0 {
		t.Fatalf("%d stars counted by the killed server, want 0", n)
	}

	// Within the lease (PTTL on the Redis server's clock, asked only with a second left):
	// 409 with Retry-After 1..5.
	if ttl := rdb.PTTL(ctx, firstKey(t, rdb)).Val(); ttl > time.Second {
		status, h, body := post(t, starURL(other.url), "acct_1", "star-1", "")
		ra, _ := strconv.Atoi(h.Get("Retry-After"))
		if status != http.StatusConflict || ra < 1 || ra > 5 {
			t.Errorf("retry within the lease: %d (Retry-After %q) %s, want 409 with Retry-After 1..5", status, h.Get("Retry-After"), body)
		}
	}

	// After the lease: the retry runs once, the next replays.
	waitUntil(t, "the claim's lease ends", func() bool { return claims() == 0 })
	status, h, first := post(t, starURL(other.url), "acct_1", "star-1", "")
	if status != http.StatusOK || h.Get("Idempotent-Replayed") != "" || !strings.Contains(first, `"stars":1`) {
		t.Fatalf("retry after the lease: %d %v %s, want 200 counting the first star", status, h, first)
	}
	status, h, again := post(t, starURL(other.url), "acct_1", "star-1", "")
	if status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || again != first {
		t.Errorf("second retry: %d %v %s, want the first answer replayed", status, h, again)
	}
	if n := stars(t, url, p.ID); n != 1 {
		t.Errorf("%d stars, want 1", n)
	}
}

func firstKey(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "idem:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no key in Redis (%v)", err)
	}
	return keys[0]
}

func stars(t *testing.T, url, id string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT coalesce((SELECT stars FROM payment_stars WHERE payment_id = $1), 0)`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitUntil polls cond every 20ms for up to 30s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
