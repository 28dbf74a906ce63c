package idem

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
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
