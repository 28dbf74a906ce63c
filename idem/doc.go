// Package idem is the idempotency protocol that idemgen's generated handlers run: one
// implementation, on PostgreSQL, tested once.
//
// A call to [Store.Do] first refuses a [Policy] that breaks its rules (a set lease,
// retention or timeout under 1ms or negative, a retention shorter than the lease: an error
// wrapping [ErrInvalidPolicy], before any SQL; [NewPolicy] and [MustPolicy] check one when
// it is built). Then, for a request carrying an idempotency key, it:
//
//  1. validates the key before any SQL ([ParseKey]: 1–255 bytes of printable ASCII, the bare
//     or the RFC 8941 sf-string form, one value only, never blank and never beginning or
//     ending with a space, whether quoted, bare or in the body); an invalid key is answered
//     400, and so is a missing key when the policy requires one;
//  2. claims (scope, key) with an autocommitted INSERT ... ON CONFLICT DO NOTHING, so a
//     concurrent duplicate sees the row "processing" at once;
//  3. when the key exists: past retention → takes it over as a fresh claim; another operation
//     or another request fingerprint → 422; completed → replays the stored status, headers
//     and byte-identical body with "Idempotent-Replayed: true"; processing with a live lease →
//     409 with Retry-After (the lease's seconds left, 1 at least, at most the lease and the
//     operation's timeout); processing past its lease → reclaims it with a new fencing token
//     (exactly one contender wins: FOR UPDATE SKIP LOCKED, rows affected);
//  4. runs the business function in one transaction that first locks its own claim row
//     (fenced by the lease token), bounded by the policy's timeout, then stores its recorded
//     response and marks the key completed (again fenced: exactly one row), then commits.
//     Business writes and the key's outcome commit together or not at all;
//  5. on a business error or a non-cacheable response (5xx by default) rolls back and
//     releases the claim so a retry runs at once; after a COMMIT whose outcome is unknown it
//     does not release (the lease and reclaim settle it);
//  6. retries the business transaction on serialization failures (40001) and deadlocks
//     (40P01) a bounded number of times while it still owns the claim.
//
// A request without a key, when the policy allows one, runs the business function in a
// plain transaction under the same timeout, with no idempotency.
//
// Rejections (400, 409, 422) never change the stored row. Their bodies are RFC 9457
// problem details (application/problem+json). All times come from the database clock.
//
// The response is recorded ([Store.Record]; [Record] with the default cap) up to the store's
// cap on the body, [DefaultMaxResponseBytes] (1 MiB) unless [WithMaxResponseBytes] says
// otherwise. Past it the recorder's Write fails with [ErrResponseTooLarge] and the call fails
// closed: rolled back, released, answered 500; a partial body is never stored. Informational
// statuses (1xx, e.g. 103 Early Hints) are not the response: the status and headers are
// those of the final WriteHeader.
//
// The lease never cancels a live owner: holding the row lock of step 4 keeps a slow owner
// from being reclaimed. The lease only bounds how long a claim whose owner is gone (a crash
// between claim and lock, a release that failed) blocks retries.
//
// The table is in schema.sql at the module root (see [Migrate] and `idemgen schema`).
package idem
