package idem

import (
	"context"
	"testing"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// A change of the key table that changes the type of a column the claim reads (a
// migration during a rolling deploy) fails, on a connection that prepared the claim's
// statements before it, at most the next request: PostgreSQL refuses the prepared GetKey
// ("cached plan must not change result type", 0A000), pgx drops the flight's statements
// from its cache, and the request after prepares them again. (Statements prepared once
// for the connection's life would fail every request on it.)
func TestClaimAfterTheKeyTableChanged(t *testing.T) {
	e := newEnv(t)
	s := NewStore(pgtest.PoolWithMax(t, e.url, 1)) // one connection: it prepared the statements
	p := policy("createThing")
	ctx := context.Background()
	if r, err := s.Do(ctx, p, ptr("k"), parts("x"), insertOne("x")); err != nil || r.Outcome != OutcomeCompleted {
		t.Fatalf("before the change: %+v, %v", r, err)
	}
	if _, err := e.pool.Exec(ctx, "ALTER TABLE idempotency_keys ALTER COLUMN response_status TYPE bigint"); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := range 3 {
		r, err := s.Do(ctx, p, ptr("k"), parts("x"), insertOne("x"))
		switch {
		case err != nil:
			failed++
			if pgError(err) == nil || pgError(err).Code != "0A000" {
				t.Fatalf("replay %d after the change: %v; want the server's 0A000 or a replay", i, err)
			}
		case r.Outcome != OutcomeReplayed || r.Status != 201:
			t.Fatalf("replay %d after the change: %s %d; want a replay of the 201", i, r.Outcome, r.Status)
		}
	}
	if failed > 1 {
		t.Fatalf("%d of 3 replays after the change failed; want at most the first", failed)
	}
}
