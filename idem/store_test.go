package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// Under SERIALIZABLE, the protocol's own statements in the business transaction (lock own
// row, complete) must not make concurrent requests on different keys conflict with each
// other: business code that does not conflict gets no serialization failures from idem.
// With no retries allowed, every one of 32 concurrent requests × 5 rounds must complete.
func TestSerializableDifferentKeysDoNotConflict(t *testing.T) {
	e := newEnv(t, WithMaxRetries(0))
	p := policy("createThing")
	p.Isolation = pgx.Serializable
	const n, rounds = 32, 5
	for round := range rounds {
		outcomes := make([]Outcome, n)
		errs := make([]error, n)
		release(n, func(i int) {
			key := fmt.Sprintf("r%d-k%d", round, i)
			r, err := e.store.Do(context.Background(), p, &key, parts(key), insertOne(key))
			errs[i] = err
			if r != nil {
				outcomes[i] = r.Outcome
			}
		})
		for i := range n {
			if errs[i] != nil || outcomes[i] != OutcomeCompleted {
				t.Fatalf("round %d, request %d: %v %v; want completed", round, i, outcomes[i], errs[i])
			}
		}
	}
	if got := e.rows(""); got != n*rounds {
		t.Fatalf("%d business rows, want %d", got, n*rounds)
	}
}

// The same with SERIALIZABLE as the database's default (the policy says nothing), on
// connections that have not run a claim yet (a new pool, or connections opened since):
// a claim that does not know its connection's default yet must not read the key's row
// under SERIALIZABLE either (its predicate lock on the primary key's page would fail the
// completions of the other keys on that page). No retries allowed: every request of a cold
// pool completes at once, and each business runs once.
func TestSerializableDefaultColdConnectionsDoNotConflict(t *testing.T) {
	url := pgtest.NewDB(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	admin := pgtest.Pool(t, pgtest.URL(t))
	if _, err := admin.Exec(context.Background(), fmt.Sprintf(
		"ALTER DATABASE %s SET default_transaction_isolation = 'serializable'",
		pgx.Identifier{cfg.Database}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	e := newEnvOn(t, url, WithMaxRetries(0)) // 40 connections, none has claimed yet
	p := policy("createThing")
	const n = 32
	var calls atomic.Int64
	business := func(ctx context.Context, tx Tx) (*Response, error) {
		calls.Add(1)
		k, _ := KeyFromContext(ctx)
		return insertOne(k.Key)(ctx, tx)
	}
	outcomes := make([]Outcome, n)
	errs := make([]error, n)
	release(n, func(i int) {
		key := fmt.Sprintf("k%d", i)
		r, err := e.store.Do(context.Background(), p, &key, parts(key), business)
		errs[i] = err
		if r != nil {
			outcomes[i] = r.Outcome
		}
	})
	for i := range n {
		if errs[i] != nil || outcomes[i] != OutcomeCompleted {
			t.Errorf("request %d: %v %v; want completed", i, outcomes[i], errs[i])
		}
	}
	if got := calls.Load(); got != n {
		t.Fatalf("the business ran %d times for %d keys", got, n)
	}
}

// A request whose client is already gone claims nothing: acquiring the business
// connection follows the request's cancellation, before any SQL.
func TestCancelledRequestLeavesNoClaim(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.store.Do(ctx, p, ptr("k"), parts("x"), insertOne("x"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if e.keyRows() != 0 || e.rows("") != 0 || e.count(OutcomeClaimed) != 0 {
		t.Fatalf("%d keys, %d rows, claimed %d; want 0, 0, 0", e.keyRows(), e.rows(""), e.count(OutcomeClaimed))
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s", r.Outcome)
	}
}

// A scope function that cannot name the tenant answers with its problem, before any SQL.
func TestScopeProblem(t *testing.T) {
	e := newEnv(t, WithScope(func(ctx context.Context) (string, error) {
		return "", fmt.Errorf("auth: %w", &Problem{Status: http.StatusUnauthorized, Detail: "no credentials"})
	}))
	r, err := e.store.Do(context.Background(), policy("createThing"), ptr("k"), parts("x"), insertOne("x"))
	if err != nil || r.Status != http.StatusUnauthorized || header(r, "Content-Type") != "application/problem+json" ||
		!strings.Contains(string(r.Body), `"title":"Unauthorized"`) {
		t.Fatalf("got %+v, %v; want a 401 problem", r, err)
	}
	if e.keyRows() != 0 || e.rows("") != 0 {
		t.Fatal("a rejected scope changed state")
	}
}

// Behind a transaction pooler (WithTransactionPooler) the lease's idle bound is set in each
// transaction, also in pgx's default mode, and never left on the session: a pooler hands
// the session to other transactions. Without the option that mode sets it once on the
// session.
func TestTransactionPoolerSetsTheIdleBoundPerTransaction(t *testing.T) {
	e := newEnv(t)
	if e.pool.Config().ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		t.Skip("the pool is not in pgx's default mode (behind PgBouncer): the bound is always SET LOCAL there")
	}
	for _, c := range []struct {
		name         string
		opts         []Option
		wantSessions string // the session's value after the request
	}{
		{"session ours", nil, "7s"},
		{"transaction pooler", []Option{WithTransactionPooler()}, "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := pgtest.PoolWithMax(t, e.url, 1) // one connection: its session is the one the request used
			s := NewStore(pool, c.opts...)
			p := policy("createThing")
			p.Lease = 7 * time.Second
			var inside string
			r, err := s.Do(context.Background(), p, ptr("k-"+c.name), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
				if err := tx.QueryRow(ctx, "show idle_in_transaction_session_timeout").Scan(&inside); err != nil {
					return nil, err
				}
				return insertOne("x")(ctx, tx)
			})
			if err != nil || r.Outcome != OutcomeCompleted {
				t.Fatalf("%+v, %v", r, err)
			}
			var after string
			if err := pool.QueryRow(context.Background(), "show idle_in_transaction_session_timeout").Scan(&after); err != nil {
				t.Fatal(err)
			}
			if inside != "7s" || after != c.wantSessions {
				t.Errorf("idle_in_transaction_session_timeout: %q in the transaction, %q on the session after it; want 7s, %s", inside, after, c.wantSessions)
			}
		})
	}
}
