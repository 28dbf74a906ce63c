package idemredis

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
)

// waitGone polls until key has no record: its TTL ran out on the Redis server's clock.
func waitGone(t *testing.T, e *env, key string) {
	t.Helper()
	rk := redisKey(DefaultPrefix, "", key)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, err := e.rdb.Exists(context.Background(), rk).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s still held after 10s", key)
}

// The lease runs out while the business runs and a retry claims the key and completes:
// the first owner's completion is refused (fenced, counted, logged), never overwriting
// the newer owner's record; its client gets the business's own answer. The business ran
// twice: the desync "lease gone".
func TestLeaseRunsOutDuringBusiness(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	p := *testPolicy
	p.Lease = 200 * time.Millisecond
	var runs atomic.Int32
	first, err := e.store.Do(ctx, &p, ptr("slow"), body("p"), func(context.Context) (*idem.Response, error) {
		n := int(runs.Add(1))
		waitGone(t, e, "slow") // the lease ran out: the owner is presumed gone
		retry, err := e.store.Do(ctx, &p, ptr("slow"), body("p"), func(context.Context) (*idem.Response, error) {
			return created(int(runs.Add(1))), nil
		})
		if err != nil || retry.Outcome != idem.OutcomeCompleted {
			t.Errorf("retry: %+v %v, want completed", retry, err)
		}
		return created(n), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if first.Outcome != OutcomeCompletionLost || !strings.Contains(string(first.Body), `"star": 1`) {
		t.Errorf("first owner: %s %s; want completion_lost with its own answer", first.Outcome, first.Body)
	}
	if runs.Load() != 2 || e.seen.get(OutcomeFenced) != 1 || e.seen.get(OutcomeCompletionLost) != 1 {
		t.Errorf("%d runs, outcomes %s; want 2 runs, 1 fenced, 1 completion_lost", runs.Load(), e.seen)
	}
	replay, err := e.store.Do(ctx, &p, ptr("slow"), body("p"), func(context.Context) (*idem.Response, error) {
		t.Error("ran a third time")
		return created(3), nil
	})
	if err != nil || replay.Outcome != idem.OutcomeReplayed || !strings.Contains(string(replay.Body), `"star": 2`) {
		t.Errorf("replay %s %s; want the newer owner's answer (star 2)", replay.Outcome, replay.Body)
	}
}

// The lease runs out during the business but no one claims the key: the completion is
// recorded all the same (late_completion), and retries replay it.
func TestLateCompletionWithoutNewerOwner(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	p := *testPolicy
	p.Lease = 100 * time.Millisecond
	resp, err := e.store.Do(ctx, &p, ptr("late"), body("p"), func(context.Context) (*idem.Response, error) {
		waitGone(t, e, "late")
		return created(1), nil
	})
	if err != nil || resp.Outcome != idem.OutcomeCompleted || e.seen.get(OutcomeLateCompletion) != 1 {
		t.Fatalf("%+v %v, outcomes %s; want completed after a late_completion", resp, err, e.seen)
	}
	again, _ := e.store.Do(ctx, &p, ptr("late"), body("p"), func(context.Context) (*idem.Response, error) { return created(2), nil })
	if again.Outcome != idem.OutcomeReplayed {
		t.Errorf("retry: %s, want replayed", again.Outcome)
	}
}

// Redis dies after the business finished and before the completion: the client gets the
// business's answer (completion_lost), and once Redis is back (empty) the retry runs the
// business again. The desync "Redis down".
func TestRedisDownAtCompletion(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	var runs atomic.Int32
	fn := func(context.Context) (*idem.Response, error) { return created(int(runs.Add(1))), nil }
	e.store.hookBusinessDone = e.srv.Kill
	resp, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), fn)
	if err != nil || resp.Outcome != OutcomeCompletionLost || resp.Status != http.StatusCreated {
		t.Fatalf("%+v %v; want the business's 201 with outcome completion_lost", resp, err)
	}
	e.store.hookBusinessDone = nil
	e.srv.Restart()
	retry, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), fn)
	if err != nil || retry.Outcome != idem.OutcomeCompleted || runs.Load() != 2 {
		t.Errorf("retry: %+v %v, %d runs; want it to run again (2 runs)", retry, err, runs.Load())
	}
}

// While Redis is down every keyed request is answered 503 with Retry-After and its
// business never runs; a business that fails is never replayed as a success.
func TestRedisDownIs503(t *testing.T) {
	e := newEnv(t, nil, WithUnavailableRetryAfter(2*time.Second))
	ctx := context.Background()
	e.srv.Kill()
	resp, err := e.store.Do(ctx, testPolicy, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) {
		t.Error("business ran unprotected")
		return created(1), nil
	})
	if err != nil || resp.Status != http.StatusServiceUnavailable || resp.Outcome != OutcomeUnavailable {
		t.Fatalf("%+v %v; want 503 unavailable", resp, err)
	}
	if ra := written(t, resp).Header.Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After %q, want 2", ra)
	}
}

// Redis is killed and restarted while 16 workers send requests with fresh keys: every
// request answered 503 ran no business, every business that ran belongs to a request
// answered with its own response (completed, or completion_lost for those whose
// completion met the dead server), and afterwards the keys completed before the crash
// run again (the restart lost them, as documented) while those completed after the
// restart replay.
func TestRedisRestartMidRun(t *testing.T) {
	e := newEnv(t, nil)
	const workers, before, down, after = 16, 300, 100, 300
	const (
		phaseUp = iota
		phaseDown
		phaseRestarted
	)
	type result struct {
		phase   int32 // when the request began
		outcome idem.Outcome
		runs    atomic.Int32
	}
	var (
		mu        sync.Mutex
		results   []*result
		phase     atomic.Int32
		answered  [3]atomic.Int32 // by the phase the request began in
		recovered atomic.Int32    // completed requests begun after the restart
		deadline  = time.Now().Add(30 * time.Second)
		killOnce  sync.Once
		startOnce sync.Once
		ready     sync.WaitGroup
		done      sync.WaitGroup
		start     = make(chan struct{})
	)
	for range workers {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			// go-redis answers from its pool's last dial error for up to a second after a
			// burst of failed dials, so the 503s go on a little after the restart.
			for recovered.Load() < after && time.Now().Before(deadline) {
				r := &result{phase: phase.Load()}
				mu.Lock()
				i := len(results)
				results = append(results, r)
				mu.Unlock()
				key := fmt.Sprintf("r-%d", i)
				resp, err := e.store.Do(context.Background(), testPolicy, ptr(key), body(key), func(context.Context) (*idem.Response, error) {
					return created(int(r.runs.Add(1))), nil
				})
				if err != nil {
					t.Errorf("%s: %v", key, err)
					return
				}
				r.outcome = resp.Outcome
				if r.phase == phaseRestarted && r.outcome == idem.OutcomeCompleted {
					recovered.Add(1)
				}
				switch n := answered[r.phase].Add(1); {
				case r.phase == phaseUp && n == before:
					killOnce.Do(func() { phase.Store(phaseDown); e.srv.Kill() })
				case r.phase == phaseDown && n == down:
					startOnce.Do(func() { e.srv.Restart(); phase.Store(phaseRestarted) })
				}
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	byOutcome := map[idem.Outcome]int{}
	for i, r := range results {
		o, n := r.outcome, r.runs.Load()
		byOutcome[o]++
		switch o {
		case OutcomeUnavailable:
			if n != 0 {
				t.Errorf("r-%d answered 503 but its business ran %d times", i, n)
			}
		case idem.OutcomeCompleted, OutcomeCompletionLost:
			if n != 1 {
				t.Errorf("r-%d answered %s, business ran %d times", i, o, n)
			}
		default:
			t.Errorf("r-%d: outcome %q", i, o)
		}
	}
	t.Logf("answers: %v", byOutcome)
	if recovered.Load() < after {
		t.Fatalf("%d requests completed after the restart within 30s, want %d", recovered.Load(), after)
	}
	if byOutcome[OutcomeUnavailable] < down {
		t.Fatalf("%d answers 503, want at least %d (Redis was down)", byOutcome[OutcomeUnavailable], down)
	}
	// Retry every key that ran: the ones completed before the crash run again, the ones
	// completed after the restart replay.
	var ranAgain, replayed, held int
	for i, r := range results {
		if r.outcome == OutcomeUnavailable {
			continue
		}
		key := fmt.Sprintf("r-%d", i)
		resp, err := e.store.Do(context.Background(), testPolicy, ptr(key), body(key), func(context.Context) (*idem.Response, error) {
			return created(int(r.runs.Add(1))), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case resp.Outcome == idem.OutcomeReplayed:
			replayed++
		case resp.Outcome == idem.OutcomeCompleted:
			ranAgain++
		case resp.Outcome == idem.OutcomeInProgress && r.outcome == OutcomeCompletionLost:
			// Its claim landed and its completion did not: the claim holds the key until
			// its lease ends, then a retry runs the business again.
			held++
		default:
			t.Errorf("%s retried: %s", key, resp.Outcome)
		}
		switch {
		case r.phase == phaseUp && r.outcome == idem.OutcomeCompleted && resp.Outcome != idem.OutcomeCompleted:
			t.Errorf("%s completed before the crash, retried: %s; want it to run again (the restart lost its record)", key, resp.Outcome)
		case r.phase == phaseRestarted && r.outcome == idem.OutcomeCompleted && resp.Outcome != idem.OutcomeReplayed:
			t.Errorf("%s completed after the restart, retried: %s; want a replay", key, resp.Outcome)
		}
	}
	t.Logf("retries: %d replayed, %d ran again, %d held by a claim whose completion was lost (409 until its lease ends)", replayed, ranAgain, held)
}

// A server whose maxmemory-policy may evict keys is refused at start, unless the service
// says it accepts duplicates; under noeviction a full server refuses claims: 503, the
// business not run.
func TestEvictionPolicy(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "volatile-lru", "allkeys-random"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.Start(t, "--maxmemory", "10mb", "--maxmemory-policy", policy)
			c := clientFor(t, srv.Addr())
			_, err := New(context.Background(), c, WithLogger(quietLogger(t)))
			if !errors.Is(err, ErrEvictingPolicy) || !strings.Contains(err.Error(), policy) {
				t.Fatalf("New on %s: %v, want ErrEvictingPolicy naming it", policy, err)
			}
			var log strings.Builder
			if _, err := New(context.Background(), c, AllowEvictingPolicy(), WithLogger(textLogger(&log))); err != nil {
				t.Fatalf("with AllowEvictingPolicy: %v", err)
			}
			if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), policy) {
				t.Errorf("no loud warning: %q", log.String())
			}
		})
	}
	t.Run("noeviction-full", func(t *testing.T) {
		e := newEnv(t, []string{"--maxmemory-policy", "noeviction"})
		if err := e.rdb.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		resp, err := e.store.Do(context.Background(), testPolicy, ptr("k"), body("p"), func(context.Context) (*idem.Response, error) {
			t.Error("business ran unprotected")
			return created(1), nil
		})
		if err != nil || resp.Status != http.StatusServiceUnavailable {
			t.Errorf("%+v %v; want 503", resp, err)
		}
	})
}

// A Redis that cannot be reached at start fails New: the check cannot be skipped by
// accident.
func TestNewUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	c := clientFor(t, srv.Addr())
	srv.Kill()
	if _, err := New(context.Background(), c); err == nil || errors.Is(err, ErrEvictingPolicy) {
		t.Errorf("New on a dead server: %v, want a connection error", err)
	}
}
