package idem

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestKeyCreatedAtIsTheClaim runs a business that takes 200 ms (in the database, pg_sleep)
// under each isolation level, fresh and over a key past its retention: Store.Key's
// CreatedAt is when the request claimed the key, 200 ms or more before CompletedAt.
func TestKeyCreatedAtIsTheClaim(t *testing.T) {
	e := newEnv(t)
	slow := func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := tx.Exec(ctx, "SELECT pg_sleep(0.2)"); err != nil {
			return nil, err
		}
		return insertOne("x")(ctx, tx)
	}
	for _, iso := range []pgx.TxIsoLevel{"", pgx.RepeatableRead, pgx.Serializable} {
		t.Run(isoName(iso), func(t *testing.T) {
			p := policy("createThing")
			p.Isolation = iso
			key := "created-" + isoName(iso)
			for round, name := range []string{"fresh", "past retention"} {
				if resp := e.do(p, key, "x", slow); resp.Outcome != OutcomeCompleted {
					t.Fatalf("%s: %s; want completed", name, resp.Outcome)
				}
				st, err := e.store.Key(context.Background(), "", key)
				if err != nil {
					t.Fatal(err)
				}
				if took := st.CompletedAt.Sub(st.CreatedAt); took < 200*time.Millisecond {
					t.Fatalf("%s: created %s, completed %s (%s apart); want created at the claim, ≥ 200ms before",
						name, st.CreatedAt, st.CompletedAt, took)
				}
				if round == 0 {
					if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = $1`, key); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
