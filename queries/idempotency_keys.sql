-- Queries of the idem protocol (see ../shared DESIGN "The protocol" and idem/doc.go).
-- Durations are passed as bigint microseconds; every time comes from the database clock.

-- Step 3: autocommitted insert of a processing row. No row returned: the key exists.
-- DO NOTHING (not DO UPDATE ... WHERE) so a duplicate never waits on the owner's row lock.
-- name: ClaimKey :one
INSERT INTO idempotency_keys (scope, key, operation, fingerprint, status, leased_until, expires_at)
VALUES (
    sqlc.arg(scope), sqlc.arg(key), sqlc.arg(operation), sqlc.arg(fingerprint), 'processing',
    now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond',
    now() + sqlc.arg(retention_us)::bigint * interval '1 microsecond'
)
ON CONFLICT (scope, key) DO NOTHING
RETURNING lease_token, ctid::text AS row_id;

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

-- Step 4, expired row (past retention): becomes a fresh claim for this request.
-- SKIP LOCKED: a row some transaction holds is not ours to take.
-- name: TakeOverExpired :one
UPDATE idempotency_keys AS k
SET operation        = sqlc.arg(operation),
    fingerprint      = sqlc.arg(fingerprint),
    status           = 'processing',
    lease_token      = nextval('idempotency_lease_token_seq'),
    leased_until     = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond',
    response_status  = NULL,
    response_headers = NULL,
    response_body    = NULL,
    created_at       = now(),
    completed_at     = NULL,
    expires_at       = now() + sqlc.arg(retention_us)::bigint * interval '1 microsecond'
WHERE (k.scope, k.key) IN (
    SELECT e.scope, e.key FROM idempotency_keys AS e
    WHERE e.scope = sqlc.arg(scope) AND e.key = sqlc.arg(key) AND e.expires_at <= now()
      AND (e.status = 'completed' OR e.leased_until <= now())
    FOR UPDATE SKIP LOCKED
)
RETURNING k.lease_token, k.ctid::text AS row_id;

-- Step 4, processing row past its lease: a new fencing token. The row lock held by a
-- live owner's business transaction makes SKIP LOCKED pass it over; zero rows = we lost.
-- name: ReclaimKey :one
UPDATE idempotency_keys AS k
SET lease_token  = nextval('idempotency_lease_token_seq'),
    leased_until = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond'
WHERE (k.scope, k.key) IN (
    SELECT r.scope, r.key FROM idempotency_keys AS r
    WHERE r.scope = sqlc.arg(scope) AND r.key = sqlc.arg(key)
      AND r.operation = sqlc.arg(operation) AND r.fingerprint = sqlc.arg(fingerprint)
      AND r.status = 'processing' AND r.leased_until <= now()
    FOR UPDATE SKIP LOCKED
)
RETURNING k.lease_token, k.ctid::text AS row_id;

-- Step 5, first statement of the business transaction: lock our own claim.
-- No row: the claim was reclaimed by another request (lease lost).
-- The row is addressed by the ctid the claim returned (a reclaim or takeover writes a
-- new row version, so a changed ctid is a lost claim too): a TID scan takes no
-- predicate lock on index pages, so under SERIALIZABLE the key rows of concurrent
-- requests do not conflict with each other. The token remains the fence.
-- name: LockOwnKey :one
SELECT lease_token
FROM idempotency_keys
WHERE ctid = sqlc.arg(row_id)::text::tid
  AND scope = sqlc.arg(scope) AND key = sqlc.arg(key) AND lease_token = sqlc.arg(lease_token) AND status = 'processing'
FOR UPDATE;

-- Step 5, fenced by the lease token: must touch exactly one row. By ctid, as LockOwnKey
-- (the row lock does not change it).
-- name: CompleteKey :execrows
UPDATE idempotency_keys
SET status           = 'completed',
    response_status  = sqlc.arg(response_status),
    response_headers = sqlc.arg(response_headers),
    response_body    = sqlc.arg(response_body),
    completed_at     = clock_timestamp(),
    expires_at       = clock_timestamp() + sqlc.arg(retention_us)::bigint * interval '1 microsecond'
WHERE ctid = sqlc.arg(row_id)::text::tid
  AND scope = sqlc.arg(scope) AND key = sqlc.arg(key) AND lease_token = sqlc.arg(lease_token) AND status = 'processing';

-- Step 6: give the key back after a rollback so a retry runs at once.
-- name: ReleaseKey :execrows
DELETE FROM idempotency_keys
WHERE scope = sqlc.arg(scope) AND key = sqlc.arg(key) AND lease_token = sqlc.arg(lease_token) AND status = 'processing';

-- Deletes at most batch_size rows past retention (completed, or processing past
-- their lease). Call in a loop until it returns 0.
-- name: PurgeExpired :execrows
DELETE FROM idempotency_keys AS k
WHERE (k.scope, k.key) IN (
    SELECT p.scope, p.key FROM idempotency_keys AS p
    WHERE p.expires_at <= now()
      AND (p.status = 'completed' OR p.leased_until <= now())
    LIMIT sqlc.arg(batch_size)::int
    FOR UPDATE SKIP LOCKED
);

-- Processing rows past their lease: claims whose owner is gone and no retry came yet.
-- name: CountStaleProcessing :one
SELECT count(*)::bigint AS stale
FROM idempotency_keys
WHERE status = 'processing' AND leased_until <= now();

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
