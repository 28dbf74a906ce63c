package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is one test's database: a store on a fresh database with a business table.
type env struct {
	t     testing.TB
	url   string
	pool  *pgxpool.Pool
	store *Store
	// outcomes counts every outcome the observer saw, across the test.
	mu       sync.Mutex
	outcomes map[Outcome]int
}

func newEnv(t testing.TB, opts ...Option) *env {
	t.Helper()
	return newEnvOn(t, pgtest.NewDB(t), opts...)
}

// newEnvOn is newEnv on the database at url.
func newEnvOn(t testing.TB, url string, opts ...Option) *env {
	t.Helper()
	pool := pgtest.PoolWithMax(t, url, 40)
	ctx := context.Background()
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE business (
		id bigserial PRIMARY KEY, scope text NOT NULL, key text, payload text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, url: url, pool: pool, outcomes: map[Outcome]int{}}
	e.store = NewStore(pool, append([]Option{e.observer()}, opts...)...)
	return e
}

// observer counts a store's outcomes in e (count).
func (e *env) observer() Option {
	return WithObserver(func(_ string, o Outcome) {
		e.mu.Lock()
		e.outcomes[o]++
		e.mu.Unlock()
	})
}

func (e *env) count(o Outcome) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outcomes[o]
}

// rows counts business rows, optionally for one key.
func (e *env) rows(where string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM business "+where, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// int runs a query that returns one integer.
func (e *env) int(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (e *env) keyRows() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// waitFor polls cond in the database until it is true: waiting for the database clock to
// pass a lease or retention, not ordering goroutines.
func (e *env) waitFor(cond string, args ...any) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if err := e.pool.QueryRow(context.Background(), "SELECT "+cond, args...).Scan(&ok); err != nil {
			e.t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", cond)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// insertOne is a business function: one business row, a 201 with the row's id.
func insertOne(payload string) Func {
	return func(ctx context.Context, tx Tx) (*Response, error) {
		k, _ := KeyFromContext(ctx)
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO business (scope, key, payload) VALUES ($1, $2, $3) RETURNING id`,
			k.Scope, k.Key, payload).Scan(&id); err != nil {
			return nil, err
		}
		return jsonResponse(http.StatusCreated, map[string]any{"id": id, "payload": payload})
	}
}

func jsonResponse(status int, v any) (*Response, error) {
	return Record(func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/things/%v", v.(map[string]any)["id"]))
		w.WriteHeader(status)
		return json.NewEncoder(w).Encode(v)
	})
}

func policy(op string) *Policy {
	return &Policy{Operation: op, KeySource: "header Idempotency-Key", KeyRequired: true}
}

func ptr(s string) *string { return &s }

func parts(payload string) []Part {
	return []Part{{Name: "body", Value: map[string]string{"payload": payload}}}
}

// do runs one request through the store and fails the test on an error.
func (e *env) do(p *Policy, key, payload string, fn Func) *Response {
	e.t.Helper()
	resp, err := e.store.Do(context.Background(), p, ptr(key), parts(payload), fn)
	if err != nil {
		e.t.Fatalf("Do(%q): %v", key, err)
	}
	return resp
}

// release starts n goroutines that each run f(i) once all of them are ready (a barrier),
// and waits for them.
func release(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

var errBusiness = errors.New("business says no")
