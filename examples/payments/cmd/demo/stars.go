package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/internal/devdb"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemredis"
	"github.com/idemgen/idemgen/internal/hammer"
)

// redisStore starts (or connects to) the demo's Redis and returns the store of
// starPayment, or nil with a message when there is no Redis: the stars part is then
// skipped, and starPayment answers 503.
func redisStore(ctx context.Context, logf func(string, ...any)) (*idemredis.Store, func()) {
	addr, stop, err := devdb.RedisAddr(logf)
	if errors.Is(err, devdb.ErrNoRedisServer) {
		logf("%v: skipping the Redis part (starPayment)", err)
		return nil, func() {}
	}
	if err != nil {
		logf("no Redis (%v): starPayment (store: redis) answers 503 and the stars part is skipped", err)
		return nil, func() {}
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	store, err := service.NewRedisStore(ctx, rdb, nil)
	if err != nil {
		logf("Redis at %s: %v: the stars part is skipped", addr, err)
		rdb.Close()
		stop()
		return nil, func() {}
	}
	return store, func() { rdb.Close(); stop() }
}

// starsDemo hammers POST /payments/{id}/star, whose keys live in Redis, on one new payment:
// c.duplicates duplicates of one key, then c.keys keys × c.perKey duplicates. It prints
// the phases' table and checks that the stars counted in PostgreSQL are the executions
// (no Redis failure happened, so no completion was lost).
func starsDemo(ctx context.Context, c config, base string, pool *pgxpool.Pool, stdout, stderr io.Writer, logf func(string, ...any)) bool {
	const account = "acct_demo_stars"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/payments", strings.NewReader(`{"amount":500,"currency":"EUR","description":"to be starred"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(service.AccountHeader, account)
	req.Header.Set("Idempotency-Key", fmt.Sprintf("demo-stars-%d", time.Now().UnixNano()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		logf("stars: create a payment: %v", err)
		return false
	}
	var p struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		logf("stars: create a payment: %d %v", resp.StatusCode, err)
		return false
	}
	prefix := "demo-star-" + p.ID + "-"
	type starPhase struct {
		name string
		res  *hammer.Result
	}
	var phases []starPhase
	for _, ph := range []struct {
		name                        string
		requests, keys, concurrency int
		prefix                      string
	}{
		{fmt.Sprintf("5. one star key: %d duplicates at once, then %d retries", c.duplicates, c.retries), c.duplicates + c.retries, 1, c.duplicates, prefix + "one-"},
		{fmt.Sprintf("6. %d star keys x %d duplicates at once", c.keys, c.perKey), c.keys * c.perKey, c.keys, c.concurrency, prefix + "many-"},
	} {
		logf("%s ...", ph.name)
		res, err := hammer.Run(ctx, hammer.Config{
			URL:         base + "/payments/" + p.ID + "/star",
			Method:      http.MethodPost,
			Header:      http.Header{service.AccountHeader: {account}},
			Requests:    ph.requests,
			Keys:        ph.keys,
			Concurrency: ph.concurrency,
			KeyPrefix:   ph.prefix,
			Progress:    stderr,
		})
		if err != nil {
			logf("%s: %v", ph.name, err)
			return false
		}
		if c.verbose {
			res.WriteTable(stderr)
		}
		phases = append(phases, starPhase{ph.name, res})
	}
	var counted int64
	if err := pool.QueryRow(ctx, `SELECT coalesce((SELECT stars FROM payment_stars WHERE payment_id = $1), 0)`, p.ID).Scan(&counted); err != nil {
		logf("stars: %v", err)
		return false
	}

	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "starPayment on Redis (store: redis: the key is outside the transaction, a rare duplicate is accepted):")
	width := len("total")
	for _, ph := range phases {
		width = max(width, len(ph.name))
	}
	fmt.Fprintf(stdout, "%-*s  %8s  %7s  %8s  %8s  %5s\n", width, "", "requests", "200 new", "replayed", "409 busy", "other")
	var executions int
	var problems []string
	for _, ph := range phases {
		r := ph.res
		conflicts := r.Status[http.StatusConflict]
		fmt.Fprintf(stdout, "%-*s  %8d  %7d  %8d  %8d  %5d\n", width, ph.name, r.Requests, r.Executions, r.Replays, conflicts, r.Requests-r.Executions-r.Replays-conflicts)
		executions += r.Executions
		for _, pr := range r.Problems() {
			problems = append(problems, ph.name+": "+pr)
		}
	}
	keys := 1 + c.keys
	fmt.Fprintf(stdout, "stars counted in PostgreSQL: %d, for %d keys (Redis stayed up: no completion lost, so no star counted twice)\n", counted, keys)
	if counted != int64(executions) || executions != keys {
		problems = append(problems, fmt.Sprintf("stars: %d counted, %d executions, %d keys", counted, executions, keys))
	}
	for _, pr := range problems {
		fmt.Fprintf(stdout, "FAIL: %s\n", pr)
	}
	return len(problems) == 0
}
