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
//     ending with a space, whether quoted, bare or in the body), and against the policy's
//     [KeySchema] (the length, pattern and uuid format the spec declares; a uuid key is used
//     in lowercase, so one uuid in any case is one key); an invalid key is
//     answered 400, and so is a missing key when the policy requires one; streamed bodies
//     ([BufferMultipart], [BufferReader]) are read into memory, 413 past [WithMaxBodyBytes];
//  2. claims (scope, key) with an autocommitted INSERT ... ON CONFLICT DO NOTHING of a
//     "processing" row under a fresh fencing token, so a concurrent duplicate sees the row
//     at once;
//  3. when the key exists: past retention → takes it over as a fresh claim; another operation
//     or another request fingerprint → 422; completed → replays the stored status, headers
//     and byte-identical body with "Idempotent-Replayed: true"; processing with a live lease →
//     409 with Retry-After (the lease's seconds left, 1 at least, at most the lease and the
//     operation's timeout); processing past its lease → reclaims it under a new fencing
//     token (exactly one contender wins: FOR UPDATE SKIP LOCKED);
//  4. runs the business function in one transaction that first locks its own claim row
//     (fenced by the token), bounded by the policy's timeout, then records the response and
//     marks the key completed (again fenced), then commits. Business writes and the key's
//     outcome commit together or not at all;
//  5. on a business error or a non-cacheable response (5xx by default) rolls back and
//     releases the claim so a retry runs at once; after a COMMIT whose outcome is unknown it
//     does not release (the lease and reclaim settle it);
//  6. retries the business transaction on serialization failures (40001) and deadlocks
//     (40P01) a bounded number of times while it still owns the claim.
//
// A request without a key, when the policy allows one, runs the business function in a
// plain transaction under the same timeout, with no idempotency.
//
// Rejections (400, 409, 413, 422) never change the stored row. Their bodies are RFC 9457
// problem details (application/problem+json), or the service's own shape
// ([WithRejectionRenderer]). All times come from the database clock.
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
// The table is in schema.sql at the module root (see [Migrate] and `idemgen schema`), the
// statements in queries/idempotency_keys.sql.
//
// # Flights
//
// The statements travel in flights: several written to the server at once and their
// answers read back, one round trip (pgconn's pipeline mode). A sync point inside a flight
// ends an implicit transaction: what precedes it commits, or fails, on its own. A fresh
// request, at the database's default isolation, READ COMMITTED or REPEATABLE READ, without
// a claim pool, is three round trips, as many as a bare handler's BEGIN; INSERT; COMMIT:
//
//	flight 1   ClaimKey · sync · BEGIN · LockOwnKey · sync
//	           the business function's statements, in the same transaction
//	flight 2   CompleteKey · COMMIT · sync
//
// A duplicate (a replay, a 409, a 422) is two: flight 1, in which the claim inserts
// nothing and the lock finds nothing, then ROLLBACK · GetKey · sync. A takeover or a
// reclaim is flight 1 again with TakeOverExpired or ReclaimKey in the claim's place.
// Only one commit per request waits for its WAL flush: the business COMMIT.
//
// Why each step is safe:
//
//   - The claim has a sync of its own, so it commits before BEGIN runs: a duplicate sees
//     the processing row at once and is answered 409 without waiting for the owner's
//     business transaction. (In one batch with a single sync, BEGIN would pull the claim
//     into the business transaction, and duplicates would wait on it.)
//   - The claim's commit does not wait for its WAL flush: the statement sets
//     synchronous_commit off for its own transaction only. It is visible to duplicates
//     at once all the same. The business COMMIT, which does wait, flushes the WAL up to
//     and including the claim (WAL is written in order; with synchronous replication it
//     waits for the standbys the same way). So a claim lost in a crash or a failover
//     belongs to a request that committed nothing, whose client got no 2xx: its retry
//     claims afresh and executes once. A replay is only ever served from a completed row,
//     and a completed row is written by a business transaction, which waited for its
//     flush. Takeovers, reclaims and releases commit as usual (TestCrashAfterClaims
//     crashes PostgreSQL after claims, flushed and not).
//   - The lock names the claim's fencing token, so it can travel with the claim: the
//     token is chosen by the client (random, 63 bits; it only has to differ from the
//     row's earlier tokens), not by the database.
//   - The completion raises an error when no row carries our token in status processing
//     (SQLSTATE 22P02, "fence failed"). The error aborts the transaction, and the server
//     skips the rest of the flight up to its sync: the COMMIT behind it. Business writes
//     never commit under a lost claim; the call answers 409.
//   - When flight 2's answer is lost (the connection dropped), the COMMIT may or may not
//     have happened: the call fails with [ErrCommitUnknown] and keeps the claim, which the
//     lease and a reclaim then settle (or a retry replays, if it committed).
//
// The claim is sent apart, and the business transaction begins in a flight of its own
// (BEGIN · LockOwnKey · sync, one more round trip), in two cases: with a claim pool
// ([WithClaimPool]: the claim phase runs there, so duplicates never take a business
// connection), and under SERIALIZABLE. Under SERIALIZABLE the lock and the completion find
// the row by the ctid the claim returned (a TID scan) instead of the primary key: an index
// scan takes a predicate lock on the index page, and a completion's new index entries on
// that page would make concurrent requests on other keys fail each other with 40001. A
// reclaim or takeover moves the row to a new ctid, so the ctid fences as well as the token.
//
// In pgx's default query exec mode the flights' statements are prepared once per
// connection; in the exec and simple_protocol modes (behind PgBouncer's transaction
// pooling) they go as unnamed statements with text parameters. A connection tracer that
// implements pgx.BatchTracer sees each flight as a batch.
//
// # Sharding by tenant
//
// Every statement on idempotency_keys names scope and key in its own outer WHERE (or its
// VALUES), and none has a volatile function in an UPDATE's SET or WHERE: the token comes
// from the client, times from now() and statement_timestamp(). Purge takes no row locks
// across tenants. So with the table distributed by scope (Citus), and business tables
// co-located with it, each statement of a request runs on one shard. (The SERIALIZABLE
// path also names the row's ctid, which is only meaningful on the shard that holds the
// row; on a sharded cluster prefer READ COMMITTED or REPEATABLE READ.)
//
// # Tracing
//
// [WithTracer] reports each call's phases as spans ([Span]): idem.request, and under it
// idem.claim, idem.business (the business function runs under its context, so the spans
// it starts nest there; a retry after 40001/40P01 stays in the same span) with
// idem.complete (the completion and COMMIT), and idem.replay or idem.reject for a replayed
// or rejected answer ([Store.Reject], the generated handler's refusal of a request before
// Do, has idem.request and idem.reject too). Each span carries the operation and its
// [Outcome]; the key, the scope and the bodies are never handed to the tracer. When BEGIN
// and the own-row lock travel in the claim's flight (see Flights), a pgx tracer shows
// them under idem.claim. The package idem/idemotel adapts OpenTelemetry. Without a
// tracer the hooks cost no allocation.
package idem
