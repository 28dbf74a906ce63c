-- Queries of the idem protocol v2 (see idem/doc.go for the flights they travel in).
-- Durations are passed as bigint microseconds; every time comes from the database clock.
-- Every statement on idempotency_keys names scope and key in its own WHERE, ON or VALUES,
-- so each runs on one shard when the table is distributed by scope (Citus); none calls
-- set_config.

-- Step 3, first flight, right after BEGIN: the claim. locked is the transaction-scoped
-- advisory lock on (scope, key) (lock_hi, lock_lo: the 64 bits of the hash of an
-- unambiguous encoding of scope and key, as two int4 so that the lock is told apart from
-- bigint advisory locks in pg_locks); false: another transaction holds the key. isolation
-- is the transaction's level (the database default when BEGIN names none). The lock is
-- taken in a statement that reads the key's row, in the form DESIGN.md names: with the
-- table distributed by scope (Citus) the statement is routed to the node that holds the
-- key's shard, so the lock is one lock per key whichever node the request entered
-- through; a lock in a statement of its own would be taken on the entry node. The row
-- read here (present: there is one) does not decide the claim: this statement's
-- snapshot is taken before its lock is granted, so GetKey, the next statement of the same
-- flight, reads the row again and decides (idem/claim.go). An aggregate over the key's
-- row, not a scalar subquery: a query with a subquery is not one Citus can route under
-- generic plans (its fast path takes one table, filtered by scope equality).
-- name: LockKey :one
SELECT pg_try_advisory_xact_lock(sqlc.arg(lock_hi)::int, sqlc.arg(lock_lo)::int) AS locked,
       current_setting('transaction_isolation') AS isolation,
       (count(*) > 0)::boolean AS present
FROM idempotency_keys
WHERE scope = sqlc.arg(scope)::text AND key = sqlc.arg(key)::text;

-- Step 3 under SERIALIZABLE: the lock alone. Reading the key's row through the primary key
-- would take a predicate lock on its index page, and the completions of requests on other
-- keys of that page would then fail each other with 40001; ClaimKeyRow (whose conflict check
-- takes no predicate lock) finds the row instead. (Alone, the lock is taken on the entry
-- node: idem refuses SERIALIZABLE on Citus, see ErrSerializableOnCitus.)
-- name: LockKeyOnly :one
SELECT pg_try_advisory_xact_lock(sqlc.arg(lock_hi)::int, sqlc.arg(lock_lo)::int) AS locked,
       current_setting('transaction_isolation') AS isolation;

-- Waiting duplicate (Policy.Wait): blocks until the key's owner ends its transaction, for at
-- most the transaction's lock_timeout (sent in a READ COMMITTED transaction of its own,
-- after `SET LOCAL lock_timeout`, and rolled back). Its only answer is that the lock was
-- granted (or lock_timeout's error): the waiter then claims the key again, and that claim
-- replays the owner's answer. In a statement that reads the key's row, as LockKey, so that
-- on Citus the wait is on the node that holds the key's shard.
-- name: AwaitKey :one
SELECT pg_advisory_xact_lock(sqlc.arg(lock_hi)::int, sqlc.arg(lock_lo)::int)::text = '' AS granted,
       (count(*) > 0)::boolean AS present
FROM idempotency_keys
WHERE scope = sqlc.arg(scope)::text AND key = sqlc.arg(key)::text;

-- The key's row: in the claim's flight, right after LockKey, the row that decides the
-- claim (under READ COMMITTED its snapshot is taken once LockKey's lock is held; under
-- REPEATABLE READ it is the transaction's, and ClaimKeyRow settles it); under SERIALIZABLE
-- after LockKeyOnly or ClaimKeyRow; and after a unique violation at completion (another
-- writer won). Store.Key reads DescribeKey.
-- name: GetKey :one
SELECT operation,
       fingerprint,
       status,
       response_status,
       response_headers,
       response_body,
       (expires_at <= now() AND status = 'completed'
        OR status = 'processing' AND leased_until <= now())::boolean AS takeable,
       coalesce(greatest(0, extract(epoch FROM leased_until - now())), 0)::float8 AS lease_remaining_seconds
FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND key = sqlc.arg(key);

-- The key's row for people (Store.Key, `idemgen keys show`): its state, times and the size
-- of its recorded answer, not the answer itself.
-- name: DescribeKey :one
SELECT operation,
       fingerprint,
       status,
       response_status,
       response_headers,
       coalesce(octet_length(response_body), 0)::bigint AS body_bytes,
       created_at,
       completed_at,
       expires_at,
       leased_until,
       (expires_at <= now())::boolean AS expired
FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND key = sqlc.arg(key);

-- Step 5, fresh key: the key's row born completed, sent with COMMIT in one flight. Its
-- created_at is the transaction's start (now()): the claim, whose BEGIN opened it;
-- completed_at and expires_at count from the completion. A unique
-- violation (23505) means another writer won (one that did not take our lock): the error
-- aborts the transaction, so the COMMIT queued behind it cannot commit the business writes.
-- name: CompleteKey :exec
INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status,
                              response_status, response_headers, response_body,
                              created_at, completed_at, expires_at)
VALUES (sqlc.arg(scope), sqlc.arg(key), sqlc.arg(operation), sqlc.arg(fingerprint), 'completed',
        sqlc.arg(response_status), sqlc.arg(response_headers), sqlc.arg(response_body),
        now(), statement_timestamp(),
        statement_timestamp() + sqlc.arg(retention_us)::bigint * interval '1 microsecond');

-- Under REPEATABLE READ and SERIALIZABLE, before the business runs: the key's row as
-- 'processing', inside the transaction (never committed so: CompleteKeyOver turns it
-- completed). The snapshot predates the lock, so a row committed in between is invisible to
-- LockKey; this statement surfaces it: a conflict with a row our snapshot cannot see fails
-- with 40001 (the transaction is retried and replays it), a visible one that is not
-- takeable updates nothing (0 rows: retried likewise). The time is taken once, in VALUES,
-- and the ON CONFLICT clause reads it back as excluded.*: on a distributed table Citus
-- refuses any function that is not IMMUTABLE there.
-- name: ClaimKeyRow :execrows
INSERT INTO idempotency_keys AS k (scope, key, operation, fingerprint, status, leased_until,
                                   created_at, expires_at)
VALUES (sqlc.arg(scope), sqlc.arg(key), sqlc.arg(operation), sqlc.arg(fingerprint), 'processing', now(),
        now(), now() + sqlc.arg(retention_us)::bigint * interval '1 microsecond')
ON CONFLICT (scope, key) DO UPDATE
SET operation = excluded.operation, fingerprint = excluded.fingerprint, status = 'processing',
    lease_token = 0, leased_until = excluded.leased_until, response_status = NULL, response_headers = NULL,
    response_body = NULL, created_at = excluded.created_at, completed_at = NULL, expires_at = excluded.expires_at
WHERE k.expires_at <= excluded.created_at AND k.status = 'completed'
   OR k.status = 'processing' AND k.leased_until <= excluded.created_at;

-- Step 5 over an existing row: a takeover (past retention, or a v1 claim past its lease) or
-- our own ClaimKeyRow row ('processing' with a lease that ended when it was written: only
-- ever visible to the transaction that wrote it). When the row is neither, another writer
-- completed the key meanwhile: the SET's CASE then raises (22P02, "taken by another
-- writer"), which aborts the transaction and the COMMIT behind it. The times are taken
-- once, in VALUES, and compared as excluded.completed_at (Citus refuses any function that
-- is not IMMUTABLE in an ON CONFLICT clause); one statement with no CTE, so that Citus
-- routes it by its VALUES under generic plans too.
-- name: CompleteKeyOver :one
INSERT INTO idempotency_keys AS k (scope, key, operation, fingerprint, status,
                                   response_status, response_headers, response_body,
                                   created_at, completed_at, expires_at)
VALUES (sqlc.arg(scope), sqlc.arg(key), sqlc.arg(operation), sqlc.arg(fingerprint), 'completed',
        sqlc.arg(response_status), sqlc.arg(response_headers), sqlc.arg(response_body),
        now(), statement_timestamp(),
        statement_timestamp() + sqlc.arg(retention_us)::bigint * interval '1 microsecond')
ON CONFLICT (scope, key) DO UPDATE
SET operation = excluded.operation, fingerprint = excluded.fingerprint,
    status = CASE WHEN k.status = 'processing' AND k.leased_until <= excluded.completed_at
                    OR k.status = 'completed' AND k.expires_at <= excluded.completed_at
                  THEN 'completed'
                  ELSE ('idempotency key taken by another writer (' || k.status || ')')::int::text END,
    lease_token = 0, leased_until = excluded.completed_at, response_status = excluded.response_status,
    response_headers = excluded.response_headers, response_body = excluded.response_body,
    created_at = excluded.created_at, completed_at = excluded.completed_at,
    expires_at = excluded.expires_at
RETURNING 1::int AS completed;

-- The purge: a pass deletes the rows that expired before it began (cutoff, the database
-- clock at its start), in batches along the expires_at index, each batch a bounded range of
-- it that starts where the previous one ended, so that no statement reads again the
-- entries of the rows deleted before it (dead until vacuumed). A pass ends at its cutoff:
-- rows that expire meanwhile are the next pass's.
-- JIT off for the rest of the transaction. The planner's estimate of a batch is its
-- histogram's, and a batch near the top of the first bucket after an ANALYZE is
-- estimated at up to the whole bucket (1 % of the table: ~100k rows at 10M, 860k at
-- 86M, for a batch of 1,000), a cost over jit_above_cost (100,000): PostgreSQL then
-- compiles the DELETE, tens of milliseconds, and with inlining and optimization (over
-- 500,000) hundreds. A batch never needs it. Plain PostgreSQL; on Citus each shard's
-- statement is planned by its worker. A utility statement: not planned, never compiled.
-- name: PurgeWithoutJIT :exec
SET LOCAL jit = off;

-- name: PurgeCutoff :one
SELECT now()::timestamptz AS cutoff;

-- The end of the next batch: the expires_at of the batch_size-th row at or after from, no
-- later than the cutoff; no row when fewer are left (the batch then ends at the cutoff,
-- and it is the pass's last). An index range scan from `from` upwards that stops after
-- batch_size entries. On Citus each shard returns its first batch_size entries and the
-- coordinator takes the batch_size-th of their merge.
-- name: PurgeBound :many
SELECT expires_at
FROM idempotency_keys
WHERE expires_at >= sqlc.arg(from_at)::timestamptz AND expires_at <= sqlc.arg(cutoff)::timestamptz
ORDER BY expires_at
OFFSET sqlc.arg(batch_size)::int - 1
LIMIT 1;

-- One batch: the rows past retention with expires_at in [from, upto] (upto from PurgeBound,
-- or the cutoff: batch_size rows, plus the rows that share upto's expires_at). Completed
-- rows, and v1 claims whose lease ended before the cutoff. One statement on its own
-- columns, with no subquery and no join: its plan is an index range scan bounded at both
-- ends by constants (sent in the simple protocol), or a bitmap scan of that range; it
-- cannot turn into a scan of the table, or of the entries before from. A row taken over
-- meanwhile (its expires_at moved on) is re-checked by the DELETE and kept.
-- name: PurgeExpired :execrows
DELETE FROM idempotency_keys
WHERE expires_at >= sqlc.arg(from_at)::timestamptz AND expires_at <= sqlc.arg(upto)::timestamptz
  AND (status = 'completed' OR leased_until <= sqlc.arg(cutoff)::timestamptz);

-- Claims held now: the transaction-scoped two-key advisory locks granted in this database
-- (idem's claims, unless the application takes two-key advisory locks of its own), with
-- their holder's transaction, oldest first. held_us: how long the holder's transaction has
-- run; idle_us: how long it has waited for its client (idle in transaction), 0 while a
-- statement runs.
-- name: HeldClaims :many
SELECT l.pid::int AS pid,
       ((l.classid::bigint << 32) | l.objid::bigint)::bigint AS lock_id,
       coalesce(a.state, '')::text AS state,
       coalesce(a.application_name, '')::text AS application_name,
       coalesce(host(a.client_addr), '')::text AS client_addr,
       a.xact_start::timestamptz AS xact_start,
       (extract(epoch FROM now() - a.xact_start) * 1000000)::bigint AS held_us,
       (CASE WHEN a.state LIKE 'idle in transaction%'
             THEN extract(epoch FROM now() - a.state_change) * 1000000 ELSE 0 END)::bigint AS idle_us
FROM pg_catalog.pg_locks AS l
JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
ORDER BY a.xact_start, l.pid;

-- Claims held longer than stale_us (their lease), counted as HeldClaims finds them.
-- name: CountStaleClaims :one
SELECT count(*)::bigint AS stale
FROM pg_catalog.pg_locks AS l
JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
  AND a.xact_start <= now() - sqlc.arg(stale_us)::bigint * interval '1 microsecond';

-- Payloads (operation + fingerprint) seen under more than one key in a scope since
-- since_us ago: clients that mint a new idempotency key per retry.
-- name: DuplicatePayloads :many
SELECT scope, operation, fingerprint, count(*)::bigint AS keys
FROM idempotency_keys
WHERE created_at >= now() - sqlc.arg(since_us)::bigint * interval '1 microsecond'
GROUP BY scope, operation, fingerprint
HAVING count(*) > 1
ORDER BY keys DESC, scope, operation
LIMIT sqlc.arg(max_rows)::int;
