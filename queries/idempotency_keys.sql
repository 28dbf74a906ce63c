-- Queries of the idem protocol (see idem/doc.go for the flights they travel in).
-- Durations are passed as bigint microseconds; every time comes from the database clock.
-- Every statement on idempotency_keys names scope and key in its own outer WHERE (or
-- VALUES), and none has a volatile function in an UPDATE's SET or WHERE: the fencing
-- token comes from the client, times from now() / statement_timestamp(). So each runs on
-- one shard when the table is distributed by scope (Citus).

-- Step 3: autocommitted insert of a processing row under our fencing token. 0 rows: the
-- key exists. DO NOTHING (not DO UPDATE ... WHERE) so a duplicate never waits on the
-- owner's row lock. The claim's own commit does not wait for its WAL flush
-- (synchronous_commit is off for this one transaction): the business COMMIT, which waits,
-- flushes it; a claim lost in a crash belongs to a request that committed nothing.
-- row_id (the row's ctid) addresses the row under SERIALIZABLE (see LockOwnKeyAt).
-- name: ClaimKey :one
INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, lease_token, leased_until, expires_at)
SELECT sqlc.arg(scope)::text, sqlc.arg(key)::text, sqlc.arg(operation)::text, sqlc.arg(fingerprint)::bytea,
       'processing', sqlc.arg(lease_token)::bigint,
       now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond',
       now() + sqlc.arg(retention_us)::bigint * interval '1 microsecond'
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS claim_commit_without_wal_flush
ON CONFLICT (scope, key) DO NOTHING
RETURNING ctid::text AS row_id;

-- Step 4: read the existing row, with its expiry and lease judged by the database clock.
-- A processing row past retention is expired only once its lease ended too (as in
-- PurgeExpired): a live lease is answered 409, whatever the retention.
-- name: GetKey :one
SELECT operation,
       fingerprint,
       status,
       lease_token,
       response_status,
       response_headers,
       response_body,
       (expires_at <= now() AND (status = 'completed' OR leased_until <= now()))::boolean AS expired,
       (leased_until <= now())::boolean AS lease_expired,
       greatest(0, extract(epoch FROM leased_until - now()))::float8 AS lease_remaining_seconds
FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND key = sqlc.arg(key);

-- Step 4, expired row (past retention): becomes a fresh claim for this request, under our
-- fencing token. SKIP LOCKED: a row some transaction holds is not ours to take. No row:
-- someone else took it or holds it.
-- name: TakeOverExpired :one
UPDATE idempotency_keys AS k
SET operation        = sqlc.arg(operation),
    fingerprint      = sqlc.arg(fingerprint),
    status           = 'processing',
    lease_token      = sqlc.arg(lease_token),
    leased_until     = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond',
    response_status  = NULL,
    response_headers = NULL,
    response_body    = NULL,
    created_at       = now(),
    completed_at     = NULL,
    expires_at       = now() + sqlc.arg(retention_us)::bigint * interval '1 microsecond'
WHERE k.scope = sqlc.arg(scope) AND k.key = sqlc.arg(key)
  AND (k.scope, k.key) IN (
    SELECT e.scope, e.key FROM idempotency_keys AS e
    WHERE e.scope = sqlc.arg(scope) AND e.key = sqlc.arg(key) AND e.expires_at <= now()
      AND (e.status = 'completed' OR e.leased_until <= now())
    FOR UPDATE SKIP LOCKED
)
RETURNING k.ctid::text AS row_id;

-- Step 4, processing row past its lease: our fencing token replaces the old one. The row
-- lock held by a live owner's business transaction makes SKIP LOCKED pass it over; no row
-- = we lost.
-- name: ReclaimKey :one
UPDATE idempotency_keys AS k
SET lease_token  = sqlc.arg(lease_token),
    leased_until = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond'
WHERE k.scope = sqlc.arg(scope) AND k.key = sqlc.arg(key)
  AND (k.scope, k.key) IN (
    SELECT r.scope, r.key FROM idempotency_keys AS r
    WHERE r.scope = sqlc.arg(scope) AND r.key = sqlc.arg(key)
      AND r.operation = sqlc.arg(operation) AND r.fingerprint = sqlc.arg(fingerprint)
      AND r.status = 'processing' AND r.leased_until <= now()
    FOR UPDATE SKIP LOCKED
)
RETURNING k.ctid::text AS row_id;

-- Step 5, first statement of the business transaction: lock our own claim, fenced by our
-- token. No row: another request's token is on the row (our claim was reclaimed or the
-- key was never ours).
-- name: LockOwnKey :one
SELECT lease_token
FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND key = sqlc.arg(key) AND lease_token = sqlc.arg(lease_token) AND status = 'processing'
FOR UPDATE;

-- LockOwnKey for SERIALIZABLE business transactions: the row is found by the ctid the
-- claim returned (a TID scan), not through the primary key. An index scan would take a
-- predicate lock on the index page, and the completion's new index entries on that page
-- would make concurrent requests on other keys fail each other with 40001. Any later
-- write to the row (a reclaim, a takeover) moves it: the ctid fences too, with the token.
-- name: LockOwnKeyAt :one
SELECT lease_token
FROM idempotency_keys
WHERE ctid = sqlc.arg(row_id)::text::tid
  AND scope = sqlc.arg(scope) AND key = sqlc.arg(key) AND lease_token = sqlc.arg(lease_token) AND status = 'processing'
FOR UPDATE;

-- Step 5, last statement before COMMIT, in the same flight: record the response, fenced by
-- our token. When the fence fails (no row updated) the statement raises (22P02, "fence
-- failed"): the error aborts the transaction, so the COMMIT queued behind it cannot commit
-- business writes under a lost claim.
-- name: CompleteKey :one
WITH completed AS (
    UPDATE idempotency_keys
    SET status           = 'completed',
        response_status  = sqlc.arg(response_status),
        response_headers = sqlc.arg(response_headers),
        response_body    = sqlc.arg(response_body),
        completed_at     = statement_timestamp(),
        expires_at       = statement_timestamp() + sqlc.arg(retention_us)::bigint * interval '1 microsecond'
    WHERE scope = sqlc.arg(scope) AND key = sqlc.arg(key) AND lease_token = sqlc.arg(lease_token) AND status = 'processing'
    RETURNING 1
)
SELECT (CASE WHEN count(*) = 1 THEN '1' ELSE 'idempotency key fence failed: the claim is no longer ours' END)::int AS completed
FROM completed;

-- CompleteKey for SERIALIZABLE business transactions, by ctid as LockOwnKeyAt (the row
-- lock does not move the row).
-- name: CompleteKeyAt :one
WITH completed AS (
    UPDATE idempotency_keys
    SET status           = 'completed',
        response_status  = sqlc.arg(response_status),
        response_headers = sqlc.arg(response_headers),
        response_body    = sqlc.arg(response_body),
        completed_at     = statement_timestamp(),
        expires_at       = statement_timestamp() + sqlc.arg(retention_us)::bigint * interval '1 microsecond'
    WHERE ctid = sqlc.arg(row_id)::text::tid
      AND scope = sqlc.arg(scope) AND key = sqlc.arg(key) AND lease_token = sqlc.arg(lease_token) AND status = 'processing'
    RETURNING 1
)
SELECT (CASE WHEN count(*) = 1 THEN '1' ELSE 'idempotency key fence failed: the claim is no longer ours' END)::int AS completed
FROM completed;

-- Step 6: give the key back after a rollback so a retry runs at once.
-- name: ReleaseKey :execrows
DELETE FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND key = sqlc.arg(key) AND lease_token = sqlc.arg(lease_token) AND status = 'processing';

-- Deletes at most batch_size rows past retention (completed, or processing past their
-- lease). Call in a loop until it returns 0. No row locks are taken up front (no FOR
-- UPDATE across tenants): the outer WHERE re-checks each row, so a row taken over or
-- completed meanwhile is kept.
-- name: PurgeExpired :execrows
DELETE FROM idempotency_keys AS k
WHERE (k.scope, k.key) IN (
    SELECT p.scope, p.key FROM idempotency_keys AS p
    WHERE p.expires_at <= now()
      AND (p.status = 'completed' OR p.leased_until <= now())
    LIMIT sqlc.arg(batch_size)::int
)
  AND k.expires_at <= now()
  AND (k.status = 'completed' OR k.leased_until <= now());

-- Processing rows past their lease: claims whose owner is gone and no retry came yet.
-- completed_at IS NULL (true of every processing row) selects the partial index.
-- name: CountStaleProcessing :one
SELECT count(*)::bigint AS stale
FROM idempotency_keys
WHERE completed_at IS NULL AND status = 'processing' AND leased_until <= now();

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
