package idem

import "context"

// Outcome names what the protocol did. [Response.Outcome] holds the final one; an
// [Observer] sees every one on the way (e.g. claimed, then completed).
type Outcome string

const (
	// Final outcomes of a call.
	OutcomeCompleted  Outcome = "completed"   // business committed, response stored (the one execution)
	OutcomeReplayed   Outcome = "replayed"    // stored response replayed
	OutcomeInProgress Outcome = "in_progress" // 409: another request holds the key
	OutcomeMismatch   Outcome = "mismatch"    // 422: other payload or operation
	OutcomeMissingKey Outcome = "missing_key" // 400: no key, and one is required
	OutcomeInvalidKey Outcome = "invalid_key" // 400: key fails ParseKey
	OutcomeLeaseLost  Outcome = "lease_lost"  // 409: our claim was reclaimed; business rolled back (stores with a committed claim, e.g. idemredis; never the PostgreSQL store)
	OutcomeNotStored  Outcome = "not_stored"  // business ran, response not cacheable (5xx): rolled back
	OutcomeUnkeyed    Outcome = "unkeyed"     // no key, not required: ran without idempotency
	OutcomeRejected   Outcome = "rejected"    // a problem response made by ProblemResponse

	// Events an Observer sees along the way.
	OutcomeClaimed   Outcome = "claimed"    // the key's lock taken, no row: the business runs
	OutcomeTakenOver Outcome = "taken_over" // the key's lock taken over a row past retention (or a v1 claim past its lease): the business runs
	OutcomeReclaimed Outcome = "reclaimed"  // a claim past its lease claimed with a new fencing token (stores with a committed claim; never the PostgreSQL store)
	OutcomeReleased  Outcome = "released"   // a committed claim deleted after a rollback (stores with a committed claim; never the PostgreSQL store)
	OutcomeRetried   Outcome = "retried"    // business transaction retried after 40001/40P01
	OutcomeFailed    Outcome = "failed"     // business or database error, or a commit of unknown outcome; rolled back unless the commit was ambiguous
)

// Observer is called for every outcome and event, with the operation id. It must be cheap
// and safe for concurrent use (the Prometheus adapter increments a counter).
type Observer func(operation string, o Outcome)

// ScopeFunc returns the scope (tenant or principal namespace) of the request in ctx.
// Keys are unique per scope. An error wrapping a *[Problem] is answered with that problem
// (e.g. 401, 403) before any SQL; any other error fails the request with that error.
type ScopeFunc func(ctx context.Context) (string, error)

// Func is the business function: it runs inside the protocol's transaction and returns the
// recorded response (see [Record]). It may run more than once when the transaction hits a
// serialization failure or deadlock, and must do all its database work through tx.
type Func func(ctx context.Context, tx Tx) (*Response, error)
