package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
)

// starEnv is the service with a Redis store on a throwaway redis-server.
func starEnv(t *testing.T) (*env, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	store, err := service.NewRedisStore(context.Background(), rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, service.Options{Redis: store}), srv
}

func (e *env) newPayment(account string) string {
	e.t.Helper()
	r := e.do(req{method: "POST", path: "/payments", account: account, key: "pay-" + account, body: `{"amount":1999,"currency":"EUR"}`})
	if r.status != http.StatusCreated {
		e.t.Fatalf("create payment: %s", r)
	}
	var p struct{ ID string }
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		e.t.Fatal(err)
	}
	return p.ID
}

func (e *env) stars(id string) int {
	return e.count("SELECT coalesce((SELECT stars FROM payment_stars WHERE payment_id = $1), 0)", id)
}

// A star is counted once per key: the same key replays the answer byte for byte, a new
// key counts another; other accounts' payments are 404s.
func TestStarPayment(t *testing.T) {
	e, _ := starEnv(t)
	id := e.newPayment("acct_1")
	star := func(account, key string) response {
		return e.do(req{method: "POST", path: "/payments/" + id + "/star", account: account, key: key})
	}
	first := star("acct_1", "s1")
	if first.status != http.StatusOK || first.body != `{"payment_id":"`+id+`","stars":1}`+"\n" {
		t.Fatalf("first star: %s", first)
	}
	again := star("acct_1", "s1")
	if again.status != http.StatusOK || again.body != first.body || !again.replayed() {
		t.Errorf("same key: %s; want the first answer replayed", again)
	}
	if second := star("acct_1", "s2"); second.status != http.StatusOK || second.body != `{"payment_id":"`+id+`","stars":2}`+"\n" {
		t.Errorf("second key: %s", second)
	}
	if other := star("acct_2", "s3"); other.status != http.StatusNotFound {
		t.Errorf("another account: %s, want 404", other)
	}
	if noKey := star("acct_1", ""); noKey.status != http.StatusBadRequest {
		t.Errorf("no key: %s, want 400", noKey)
	}
	if n := e.stars(id); n != 2 {
		t.Errorf("%d stars in the database, want 2", n)
	}
}

// 30 duplicates released together count one star; every answer is a 200 (new or
// replayed) or a 409.
func TestStarDuplicates(t *testing.T) {
	e, _ := starEnv(t)
	id := e.newPayment("acct_1")
	counted := 0
	for _, r := range e.concurrently(30, req{method: "POST", path: "/payments/" + id + "/star", account: "acct_1", key: "dup"}) {
		switch {
		case r.status == http.StatusOK && !r.replayed():
			counted++
		case r.status == http.StatusOK, r.status == http.StatusConflict:
		default:
			t.Errorf("answer %s", r)
		}
	}
	if counted != 1 || e.stars(id) != 1 {
		t.Errorf("%d answers counted a star, %d stars in the database; want 1 and 1", counted, e.stars(id))
	}
}

// Redis down: 503 with Retry-After, nothing counted; the payments operations go on.
func TestStarRedisDown(t *testing.T) {
	e, srv := starEnv(t)
	id := e.newPayment("acct_1")
	srv.Kill()
	r := e.do(req{method: "POST", path: "/payments/" + id + "/star", account: "acct_1", key: "s1"})
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Errorf("star with Redis down: %s, want 503 with Retry-After", r)
	}
	if n := e.stars(id); n != 0 {
		t.Errorf("%d stars counted while Redis was down", n)
	}
	if p := e.newPayment("acct_2"); p == "" {
		t.Error("payments stopped with Redis")
	}
}

// A service started without a Redis store answers its Redis operations 503.
func TestStarWithoutRedis(t *testing.T) {
	e := newEnv(t, service.Options{})
	id := e.newPayment("acct_1")
	r := e.do(req{method: "POST", path: "/payments/" + id + "/star", account: "acct_1", key: "s1"})
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "60" {
		t.Errorf("%s, want 503 with Retry-After", r)
	}
}
