package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
)

// starEnv is the service with a Redis store on a throwaway redis-server.
func starEnv(t *testing.T) (*env, *redistest.Server) {
	t.Helper()
	return starEnvWith(t, service.Options{})
}

func starEnvWith(t *testing.T, opts service.Options) (*env, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	store, err := service.NewRedisStore(context.Background(), rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Redis = store
	return newEnv(t, opts), srv
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

// The desync the Redis store accepts, end to end: Redis dies while a star's business runs;
// the business commits its star in PostgreSQL, its completion is lost, and the client
// gets the business's answer. Once Redis is back (empty), the retry runs the business
// again: two stars for one key. The reverse (a star replayed that was never counted)
// cannot happen: see TestStarFailureIsNotReplayed.
func TestStarCompletionLostCountsTwice(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	gate := func(ctx context.Context) error {
		select {
		case arrived <- struct{}{}:
			<-release
		default: // the retry
		}
		return nil
	}
	e, srv := starEnvWith(t, service.Options{BeforeStar: gate})
	id := e.newPayment("acct_1")
	r := req{method: "POST", path: "/payments/" + id + "/star", account: "acct_1", key: "s1"}
	answer := make(chan response, 1)
	go func() { answer <- e.do(r) }()
	<-arrived // claimed in Redis, the business running
	srv.Kill()
	close(release)
	first := <-answer
	if first.status != http.StatusOK || !strings.Contains(first.body, `"stars":1`) || e.stars(id) != 1 {
		t.Fatalf("with its completion lost: %s, %d stars; want the business's 200 and 1 star", first, e.stars(id))
	}
	srv.Restart()
	retry := e.do(r)
	for deadline := time.Now().Add(10 * time.Second); retry.status == http.StatusServiceUnavailable && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // the client's pool may answer its last dial error for a moment
		retry = e.do(r)
	}
	if retry.status != http.StatusOK || retry.replayed() || e.stars(id) != 2 {
		t.Errorf("retry: %s, %d stars; want the business run again (2 stars)", retry, e.stars(id))
	}
}

// A star whose business fails is released, never recorded: the retry runs and counts it
// once; nothing replays a star that was not counted.
func TestStarFailureIsNotReplayed(t *testing.T) {
	var failed atomic.Bool
	fail := func(context.Context) error {
		if failed.CompareAndSwap(false, true) {
			return errors.New("the star's business failed")
		}
		return nil
	}
	e, _ := starEnvWith(t, service.Options{BeforeStar: fail})
	id := e.newPayment("acct_1")
	r := req{method: "POST", path: "/payments/" + id + "/star", account: "acct_1", key: "s1"}
	if first := e.do(r); first.status != http.StatusInternalServerError || e.stars(id) != 0 {
		t.Fatalf("failed business: %s, %d stars; want 500 and nothing counted", first, e.stars(id))
	}
	if retry := e.do(r); retry.status != http.StatusOK || retry.replayed() || e.stars(id) != 1 {
		t.Errorf("retry: %s, %d stars; want it run (1 star)", retry, e.stars(id))
	}
}
