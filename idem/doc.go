// Package idem is the idempotency protocol that idemgen's generated handlers run: one
// implementation, on PostgreSQL, tested once.
//
// A call to [Store.Do] for a request carrying an idempotency key:
//
//  1. validates the key before any SQL ([ParseKey]: 1–255 bytes of printable ASCII, the bare
//     or the RFC 8941 sf-string form, one value only); a missing key is answered 400 when the
//     policy requires one;
//  2. claims (scope, key) with an autocommitted INSERT ... ON CONFLICT DO NOTHING, so a
//     concurrent duplicate sees the row "processing" at once;
//  3. when the key exists: past retention → takes it over as a fresh claim; another operation
//     or another request fingerprint → 422; completed → replays the stored status, headers
//     and byte-identical body with "Idempotent-Replayed: true"; processing with a live lease →
//     409 with Retry-After (the lease's seconds left, 1 at least, at most the lease and the
//     operation's timeout); processing past its lease → reclaims it with a new fencing token
//     (exactly one contender wins: FOR UPDATE SKIP LOCKED, rows affected);
//  4. runs the business function in one transaction that first locks its own claim row
//     (fenced by the lease token), then records the response and marks the key completed
//     (again fenced: exactly one row), then commits. Business writes and the key's outcome
//     commit together or not at all;
//  5. on a business error or a non-cacheable response (5xx by default) rolls back and
//     releases the claim so a retry runs at once; after a COMMIT whose outcome is unknown it
//     does not release (the lease and reclaim settle it);
//  6. retries the business transaction on serialization failures (40001) and deadlocks
//     (40P01) a bounded number of times while it still owns the claim.
//
// Rejections (400, 409, 422) never change the stored row. Their bodies are RFC 9457
// problem details (application/problem+json). All times come from the database clock.
//
// The lease never cancels a live owner: holding the row lock of step 4 keeps a slow owner
// from being reclaimed. The lease only bounds how long a claim whose owner is gone (a crash
// between claim and lock, a release that failed) blocks retries.
//
// The table is in schema.sql at the module root (see [Migrate] and `idemgen schema`).
package idem
