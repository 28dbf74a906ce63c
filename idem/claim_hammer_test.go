package idem

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestConcurrentDuplicatesCallTheBusinessOnce releases 50 duplicates of one key at once,
// split between two stores on pools of their own (two replicas: neither knows the other's
// owner), under each isolation level and in each of pgx's exec modes, with and without a
// wait. It counts calls of the business function, not committed rows: a duplicate whose
// claim decided from a snapshot that predates the lock would call the business a second
// time, and the primary key at completion would only roll its writes back (its calls, e.g.
// to a payment provider, would have been made). Exactly one call per key; no 5xx; with
// Wait every duplicate replays the owner's answer.
func TestConcurrentDuplicatesCallTheBusinessOnce(t *testing.T) {
	url := newEnv(t).url // the business table and the key table, migrated
	base, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}
	if m := base.ConnConfig.DefaultQueryExecMode; m != pgx.QueryExecModeCacheStatement {
		modes = []pgx.QueryExecMode{m} // DATABASE_URL names one (behind PgBouncer): that one only
	}
	isolations := []pgx.TxIsoLevel{"", pgx.RepeatableRead, pgx.Serializable}
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for _, mode := range modes {
		stores := [2]*Store{}
		for i := range stores {
			cfg := base.Copy()
			cfg.MaxConns = 20
			cfg.ConnConfig.DefaultQueryExecMode = mode
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			stores[i] = NewStore(pool)
		}
		for _, iso := range isolations {
			for _, wait := range []time.Duration{0, 20 * time.Second} {
				name := fmt.Sprintf("%s/%s/wait=%s", mode, isoName(iso), wait)
				t.Run(name, func(t *testing.T) {
					p := policy("createThing")
					p.Isolation, p.Wait = iso, wait
					for round := range rounds {
						key := fmt.Sprintf("%s/%d", name, round)
						var calls atomic.Int64
						business := func(ctx context.Context, tx Tx) (*Response, error) {
							calls.Add(1)
							return insertOne("x")(ctx, tx)
						}
						const n = 50
						resps := make([]*Response, n)
						errs := make([]error, n)
						release(n, func(i int) {
							resps[i], errs[i] = stores[i%2].Do(context.Background(), p, ptr(key), parts("x"), business)
						})
						completed := 0
						for i, r := range resps {
							if errs[i] != nil || r.Status >= 500 {
								t.Fatalf("round %d: call %d: %+v, %v", round, i, r, errs[i])
							}
							switch r.Outcome {
							case OutcomeCompleted:
								completed++
							case OutcomeReplayed:
							case OutcomeInProgress:
								if wait > 0 {
									t.Fatalf("round %d: call %d answered 409 within a %s wait", round, i, wait)
								}
								if r.Status != http.StatusConflict {
									t.Fatalf("round %d: in progress answered %d", round, r.Status)
								}
							default:
								t.Fatalf("round %d: call %d: outcome %s", round, i, r.Outcome)
							}
						}
						if got := calls.Load(); got != 1 || completed != 1 {
							t.Fatalf("round %d: the business was called %d times, %d completed; want 1, 1", round, got, completed)
						}
					}
				})
			}
		}
	}
}

func isoName(iso pgx.TxIsoLevel) string {
	if iso == "" {
		return "default"
	}
	return string(iso)
}
