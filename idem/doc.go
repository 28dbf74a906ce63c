// Package idem is the idempotency protocol that idemgen's generated handlers run: one
// implementation, on PostgreSQL, tested once.
//
// A call to [Store.Do] first refuses a [Policy] that breaks its rules (a set lease,
// retention, timeout or wait under 1ms or negative, a retention shorter than the lease:
// an error wrapping [ErrInvalidPolicy], before any SQL; [NewPolicy] and [MustPolicy] check
// one when it is built). Then, for a request carrying an idempotency key, it:
//
//  1. validates the key before any SQL ([ParseKey]: 1–255 bytes of printable ASCII, the bare
//     or the RFC 8941 sf-string form, one value only, never blank and never beginning or
//     ending with a space, whether quoted, bare or in the body), and against the policy's
//     [KeySchema] (the length, pattern and uuid format the spec declares; a uuid key is used
//     in lowercase, so one uuid in any case is one key); an invalid key is
//     answered 400, and so is a missing key when the policy requires one; streamed bodies
//     ([BufferMultipart], [BufferReader]) are read into memory, 413 past [WithMaxBodyBytes];
//  2. fingerprints the request ([Fingerprint]);
//  3. claims the key in the business transaction's first flight: BEGIN, then one statement
//     that takes a non-blocking transaction-scoped advisory lock on (scope, key) and reads
//     the key's row (LockKey), then the key's row read again by a statement whose snapshot,
//     under READ COMMITTED, follows the lock (GetKey; see Flights and, for the other
//     levels, REPEATABLE READ and SERIALIZABLE). The row, when there is one that is not past retention,
//     answers whoever holds the lock: another operation or another fingerprint → 422;
//     completed → the stored status, headers and byte-identical body with
//     "Idempotent-Replayed: true". No row (or one past retention) and the lock held by
//     another transaction → 409 with Retry-After: 1 (when a retry is likely to find the
//     owner's answer, not the longest the owner could hold the key), or, with [Policy.Wait], a wait for the
//     owner (see Waiting). The lock taken → the key is ours: a fresh claim, or a takeover
//     of the row past retention;
//  4. runs the business function in the same transaction, under the request's context,
//     bounded by the policy's timeout;
//  5. writes the key's row with the recorded response, born completed (CompleteKey, or
//     CompleteKeyOver over an existing row), and COMMITs, in one flight. The primary key is
//     the final guard: a unique violation means another writer completed the key (one that
//     did not take the same lock); the transaction rolls back and the answer comes from
//     that writer's row. Business writes and the key's outcome commit together or not at
//     all, and commit at most once per key;
//  6. on a business error or a non-cacheable response (5xx by default) rolls back: nothing
//     of the request remains, not even a claim, and a retry runs at once. A COMMIT whose
//     answer is lost is reported as an unknown outcome ([ErrCommitUnknown]; the generated
//     handlers answer 503 saying a retry with the same key settles it), never as rolled back;
//  7. retries the transaction, claim included, on serialization failures (40001) and
//     deadlocks (40P01), a bounded number of times ([WithMaxRetries]).
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
// closed: rolled back, answered 500; a partial body is never stored. Informational
// statuses (1xx, e.g. 103 Early Hints) are not the response: the status and headers are
// those of the final WriteHeader.
//
// The table is in schema.sql at the module root (see [Migrate] and `idemgen schema`), the
// statements in queries/idempotency_keys.sql.
//
// # One transaction per request
//
// The key lives in the same database and the same transaction as the business result, so
// a rollback always takes the key with it. No row is ever committed 'processing': a
// request in flight holds only a transaction-scoped lock, which the database drops when the
// transaction ends, however it ends (commit, rollback, a killed backend, a crashed service,
// a crashed database). A crash or kill -9 of the owner frees its key at once.
//
// # Lease: the bound on a silent owner
//
// An owner that goes silent inside its transaction (frozen, partitioned, blackholed: its
// connection open, no statement running) would hold its key for as long as its
// connection lives. The claim's flight sets idle_in_transaction_session_timeout to the
// policy's idle bound, so the database cuts such an owner off (and rolls it back) once its
// transaction has been idle that long. The idle bound is the lease, at least 1s; when the
// policy has a Timeout and the lease is shorter than Timeout + 1s, it is Timeout + 1s,
// because a live owner inside its timeout is never cut off (the time its business spends
// between statements, e.g. in a payment provider's call, counts as idle). So a silent
// owner blocks retries for at most max(lease, timeout + 1s). A business without a Timeout
// that keeps its transaction idle for longer than the lease is cut off: its next
// statement fails and nothing commits. Time spent running a statement is not idle: a
// statement that waits on a lock is bounded by the business's own context (the timeout)
// and by TCP timeouts ([ConfigureConnections]), not by the lease.
//
// In pgx's default query exec mode the bound is set on the connection's session, once per
// connection and per change (its own implicit transaction, before BEGIN), so the steady
// state costs no statement; the pool's other transactions on that connection get the same
// bound. In the exec and simple_protocol modes (behind PgBouncer's transaction pooling,
// where the session is not ours) every claim sets it with SET LOCAL, one statement more.
// Never with set_config in a SELECT (on Citus that statement would run on the coordinator).
//
// # Deadlines
//
// Every round trip of the protocol has a deadline: the pool acquire ([WithAcquireTimeout],
// default 5s), each of its own flights — the claim, the completion with COMMIT, a
// rollback, a read after a lost completion ([WithFlightTimeout], default 10s) — whatever
// the request's context. A flight past its deadline closes its connection (the database
// rolls the transaction back and frees the key when it notices; at the latest the idle
// bound cuts the transaction off). The business function runs under the request's context
// and the policy's timeout. A request therefore ends within acquire + claim flight +
// timeout + completion flight (5s + 10s + timeout + 10s with the defaults), retries after
// 40001/40P01 aside. The completion runs under a context the client's going away cannot
// cancel: the business ran, it must be recorded or rolled back, not left in between.
//
// A flight's deadline is its connection's socket deadline (net.Conn.SetDeadline), set when
// the flight starts and lifted when it ends, so that it never reaches the business's
// statements: past it a read or write fails and pgx closes the connection, as pgx's own
// context watcher does when a context expires (it sets the same socket deadline). The
// error wraps context.DeadlineExceeded, and pgconn.Timeout reports it. It costs no timer
// context per flight and, for the completion (whose context cannot be cancelled), no pgx
// context watch. A client gone (or the request's own deadline) still ends the claim's
// flight at once: idem watches the request's context itself (context.AfterFunc, as pgx
// does) and moves the socket's deadline to now, whatever context watcher handler the pool
// configures (pgconn.CancelRequestContextWatcherHandler's DeadlineDelay would otherwise
// defer the cut past the flight timeout); the error then wraps the context's. On a connection whose net.Conn refuses deadlines (SetDeadline fails,
// as some tunnels' do) the flight's deadline is a context's instead, handled by pgx's
// context watcher as configured. The pool acquire's deadline is a context's (pgxpool
// waits on one).
//
// # REPEATABLE READ and SERIALIZABLE
//
// The transaction's snapshot is taken by its first statement, the claim, before the lock
// is granted: a row committed in between (a duplicate that completed just before we got
// the lock) is invisible to it, and the business must never run under such a snapshot.
// Under REPEATABLE READ (the policy's or the database's default, which the claim's
// statement reports), a claim that found no row, or a row past retention, writes the key's
// row as 'processing' before the business runs (ClaimKeyRow, INSERT ... ON CONFLICT DO
// UPDATE ... WHERE takeable): a conflict with a row the snapshot cannot see fails with
// 40001, and the retried transaction replays it. The completion then updates that row
// (CompleteKeyOver). The price: one round trip and one row version more per fresh request.
// Under SERIALIZABLE the claim's statement takes the lock only (LockKeyOnly) and
// ClaimKeyRow finds the row: a read of the key's row through the primary key would take a
// predicate lock on its index page, and the completions of concurrent requests on other
// keys of that page would fail each other with 40001 (TestSerializableDifferentKeysDoNotConflict);
// an INSERT's conflict check takes none. When the policy names no level, a connection's
// first claim reads the session's default_transaction_isolation first (one round trip
// more, once per connection; TestSerializableDefaultColdConnectionsDoNotConflict), and the
// claim's statement reports the level for its next claims. READ COMMITTED keeps the
// cheapest path: the claim's flight reads the key's row a second time (GetKey) in a
// statement whose snapshot follows the lock, and the business's statements take fresh
// snapshots.
//
// # Waiting
//
// With [Policy.Wait] a duplicate does not answer 409 at once: it waits up to Wait for the
// owner's transaction to end, then runs the claim again, which replays the owner's answer
// (or, if the owner rolled back, runs the request itself). A duplicate whose owner runs in
// the same process waits on a channel and holds no connection. Otherwise it waits in the
// database (AwaitKey: a blocking lock under lock_timeout, in a READ COMMITTED transaction of
// its own, rolled back), in one of a bounded number of waiter slots (a quarter of the
// pool's connections), so that waiting duplicates never starve owners of connections;
// duplicates beyond the slots poll every 50ms without a connection. Past the wait: 409
// with Retry-After.
//
// # Flights
//
// The statements travel in flights: several written to the server at once and their
// answers read back, one round trip (pgconn's pipeline mode). A fresh request at READ
// COMMITTED is as many round trips as a bare handler's BEGIN; INSERT; COMMIT, and three
// statements more:
//
//	flight 1   BEGIN · LockKey · GetKey · sync
//	           the business function's statements, in the same transaction
//	flight 2   CompleteKey · COMMIT · sync
//
// GetKey reads the key's row again once the lock is held: LockKey's snapshot is taken
// before its lock is granted, so an owner that committed the row in between is invisible
// to it, and deciding from LockKey's row alone, a duplicate's business would run a second
// time (its writes rolled back by the primary key at completion, but its calls made). In
// the same flight it costs a statement, not a round trip. (LockKey keeps the row in its
// own statement so that the lock is taken where the row lives when the table is sharded.)
//
// One commit per request, the business COMMIT. A replay, a 409 or a 422 is two round trips:
// flight 1, then ROLLBACK. REPEATABLE READ and SERIALIZABLE add ClaimKeyRow, a round trip
// of its own, before the business. A connection tracer that implements pgx.BatchTracer
// sees each flight as a batch. In pgx's default query exec mode the flights' statements
// are prepared once per connection; in the exec and simple_protocol modes they go as
// unnamed statements with text parameters.
//
// # Protocol v1 rows
//
// Tables created by idemgen v1 may hold rows left 'processing' (v1 committed its claims).
// Migration 00002 and [Migrate] give v1's lease columns defaults and drop v1's index of
// unfinished claims. Such a row answers 409 while its lease lasts (a v1 owner may still
// run during a rolling upgrade), and the next request with its key takes it over once the
// lease ended; [Store.Purge] deletes it once past retention. No key stays stuck.
//
// # Purge
//
// [Store.Purge] (and `idemgen purge`) runs one pass: it takes the database clock once (the
// cutoff) and deletes the rows expired by then, batch by batch along the expires_at index,
// each batch a range that starts where the previous one ended, so that none reads again
// the entries of rows already deleted (they stay in the index until vacuum). A [Purger]
// runs a pass per interval, each beginning where its previous one ended. The table ships
// its own autovacuum thresholds, in rows (schema.sql, migration 00004). Sizes, WAL and the
// settings recommended for the table: docs/sizing.md.
//
// # Observability
//
// [Store.HeldClaims] lists the claims held now (pg_locks and pg_stat_activity: every
// replica's), and [Store.StaleClaims] counts those held longer than their lease (the
// idem_stale_claims gauge of idem/idemprom). [Store.Key] reads one key's row for people.
// Claims are two-key advisory locks ([LockID]: SHA-256 of a length-prefixed encoding of
// scope and key, 64 bits), told apart in pg_locks from bigint advisory locks by objsubid 2.
//
// # Sharding by tenant (Citus)
//
// Every statement on idempotency_keys names scope and key in its own WHERE, ON or VALUES.
// The lock is taken in a statement that reads the key's row (LockKey, and AwaitKey for a
// waiting duplicate: the lock in the select list of an aggregate over the key's row), so
// that with the table distributed by scope (Citus) it runs on the node that holds the
// key's shard, whichever node the request entered through: one lock per key across nodes.
// With business tables co-located by the same tenant column, each statement of a request
// runs on one shard and the transaction commits in one phase on one worker, entering
// through the coordinator or any worker, at READ COMMITTED and REPEATABLE READ, with custom
// or generic plans: no statement has a subquery or CTE Citus cannot route with parameters,
// and no ON CONFLICT clause calls a function (times are taken once, in VALUES). Purge and
// the repeated-payload read scan every shard; they are sent in the simple protocol (Citus
// plans no multi-shard statement with parameters under a generic plan).
//
// SERIALIZABLE is refused on a Citus node ([ErrSerializableOnCitus]; [Migrate] refuses a
// default of SERIALIZABLE): Citus runs no distributed SERIALIZABLE, and a worker's
// serialization failure at COMMIT reaches idem as XX000, which it cannot retry.
// [Migrate] runs through any node once the table exists (make and distribute it through
// the coordinator: `idemgen schema -citus`); on a Citus node the monitoring
// ([Store.HeldClaims], [Store.StaleClaims], [Store.Key]) reads citus_locks and
// citus_stat_activity, the whole cluster. The Citus suite (idem/citus_test.go) runs all of
// this where IDEM_CITUS_URL names a coordinator; CI has no Citus and skips it.
//
// # Tracing
//
// [WithTracer] reports each call's phases as spans ([Span]): idem.request, and under it
// idem.claim, idem.business (the business function runs under its context, so the spans
// it starts nest there) with idem.complete (the completion and COMMIT), and idem.replay or
// idem.reject for a replayed or rejected answer ([Store.Reject], the generated handler's
// refusal of a request before Do, has idem.request and idem.reject too). Each span carries
// the operation and its [Outcome]; the key, the scope and the bodies are never handed to
// the tracer. BEGIN travels in the claim's flight, so a pgx tracer shows it under
// idem.claim. The package idem/idemotel adapts OpenTelemetry. Without a tracer the hooks
// cost no allocation.
package idem
