package pgbouncer_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgbouncer"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The idem protocol's queries (bytea fingerprint and body, jsonb headers, bigint
// microseconds) run through pgbouncer in transaction mode with both exec modes that
// prepare nothing, and completed keys replay.
func TestExecModes(t *testing.T) {
	b := pgbouncer.ForTest(t, pgtest.URL(t), pgbouncer.Options{PoolSize: 4})
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			url, err := b.Via(pgtest.NewDB(t), mode)
			if err != nil {
				t.Fatal(err)
			}
			pool := pgtest.PoolWithMax(t, url, 16)
			ctx := context.Background()
			if err := idem.Migrate(ctx, pool); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `CREATE TABLE business (id bigserial PRIMARY KEY, key text NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			store := idem.NewStore(pool)
			p := &idem.Policy{Operation: "op", KeySource: "header Idempotency-Key", KeyRequired: true}
			fn := func(ctx context.Context, tx idem.Tx) (*idem.Response, error) {
				k, _ := idem.KeyFromContext(ctx)
				var id int64
				if err := tx.QueryRow(ctx, `INSERT INTO business (key) VALUES ($1) RETURNING id`, k.Key).Scan(&id); err != nil {
					return nil, err
				}
				return idem.Record(func(w http.ResponseWriter) error {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Link", `</a>; rel="next", </b>; rel="last"`)
					w.WriteHeader(http.StatusCreated)
					_, err := fmt.Fprintf(w, `{"id":%d,"bin":"\u0000\u00ff"}`, id)
					return err
				})
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for g := range 16 {
				wg.Go(func() {
					for i := range 4 {
						key := fmt.Sprintf("k-%d-%d", g, i)
						parts := []idem.Part{{Name: "body", Value: map[string]any{"n": i}}}
						first, err := store.Do(ctx, p, &key, parts, fn)
						if err != nil {
							errs <- err
							return
						}
						again, err := store.Do(ctx, p, &key, parts, fn)
						if err != nil {
							errs <- err
							return
						}
						if first.Outcome != idem.OutcomeCompleted || again.Outcome != idem.OutcomeReplayed ||
							string(again.Body) != string(first.Body) || len(again.Header) != len(first.Header) {
							errs <- fmt.Errorf("%s: %s %q then %s %q", key, first.Outcome, first.Body, again.Outcome, again.Body)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			var rows int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM business`).Scan(&rows); err != nil || rows != 64 {
				t.Fatalf("%d business rows (%v), want 64", rows, err)
			}
		})
	}
}

// pgx's default mode prepares named statements, which transaction pooling breaks: this is
// why Via and URL set default_query_exec_mode.
func TestCacheStatementBreaks(t *testing.T) {
	b := pgbouncer.ForTest(t, pgtest.URL(t), pgbouncer.Options{PoolSize: 2})
	url, err := b.Via(pgtest.NewDB(t), "cache_statement")
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.PoolWithMax(t, url, 8)
	ctx := context.Background()
	var failed error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				var n int
				if err := pool.QueryRow(ctx, "SELECT $1::int + 0*pg_backend_pid()", g*100+i).Scan(&n); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if failed == nil {
		t.Fatal("pgx's cache_statement mode worked behind transaction pooling; the documented advice may be stale")
	}
	if !strings.Contains(failed.Error(), "prepared statement") {
		t.Logf("cache_statement failed with: %v", failed)
	}
}
