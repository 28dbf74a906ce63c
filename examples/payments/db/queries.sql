-- Business queries of the payments example. They run through the idem.Tx the generated
-- handler hands the service (db.New(tx)), so they commit with the idempotency key's outcome.

-- name: InsertPayment :one
INSERT INTO payments (account_id, amount, currency, description, idempotency_scope, idempotency_key)
VALUES (sqlc.arg(account_id), sqlc.arg(amount), sqlc.arg(currency), sqlc.narg(description),
        sqlc.arg(idempotency_scope), sqlc.arg(idempotency_key))
RETURNING *;

-- name: GetPayment :one
SELECT * FROM payments
WHERE id = sqlc.arg(id) AND account_id = sqlc.arg(account_id);

-- Locks the payment for a refund, so concurrent refunds of one payment (under different
-- keys) see each other's amounts.
-- name: LockPayment :one
SELECT * FROM payments
WHERE id = sqlc.arg(id) AND account_id = sqlc.arg(account_id)
FOR UPDATE;

-- name: AddRefunded :one
UPDATE payments SET amount_refunded = amount_refunded + sqlc.arg(amount)
WHERE id = sqlc.arg(id) AND account_id = sqlc.arg(account_id)
RETURNING *;

-- name: InsertRefund :one
INSERT INTO refunds (account_id, payment_id, amount, idempotency_scope, idempotency_key)
VALUES (sqlc.arg(account_id), sqlc.arg(payment_id), sqlc.arg(amount), sqlc.arg(idempotency_scope), sqlc.arg(idempotency_key))
RETURNING *;

-- The payments of a scope whose key starts with key_prefix. The scope is the account
-- (service/account.go): naming it as account_id too keeps the count on the account's shard
-- on Citus, where a scope alone is every shard's business.
-- name: CountPaymentsByKeyPrefix :one
SELECT count(*) FROM payments
WHERE account_id = sqlc.arg(scope) AND idempotency_scope = sqlc.arg(scope)
  AND starts_with(idempotency_key, sqlc.arg(key_prefix)::text);

-- The audit: exactly-once, proven from the data. An operation's "created" keys are its
-- completed keys whose stored answer is 201 (a refund refused with 422 is completed too,
-- and must have no row). Each query returns the counts and at most max_samples offenders.
-- Rows whose key was purged after its retention, or whose key was reused after it, are
-- reported too: audit within the retention window, before purging.
--
-- A key's rows are looked up by its scope in account_id as well as in idempotency_scope:
-- the scope is the account (service/account.go), and on Citus the tables join on their
-- distribution columns only (idempotency_keys by scope, the others by account_id). A row
-- whose account is not its scope (which the service never writes) has no key, and its key
-- no row: both are reported.

-- name: AuditPayments :one
SELECT
    (SELECT count(*) FROM idempotency_keys k
      WHERE k.operation = 'createPayment' AND k.status = 'completed' AND k.response_status = 201
    )::bigint AS created_keys,
    (SELECT count(*) FROM payments)::bigint AS business_rows,
    (SELECT count(*) FROM idempotency_keys k
      WHERE k.operation = 'createPayment' AND k.status = 'completed' AND k.response_status = 201
        AND NOT EXISTS (SELECT 1 FROM payments p
                         WHERE p.account_id = k.scope AND p.idempotency_scope = k.scope AND p.idempotency_key = k.key)
    )::bigint AS keys_without_row,
    (SELECT count(*) FROM payments p
      WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k
                         WHERE k.scope = p.account_id AND k.scope = p.idempotency_scope AND k.key = p.idempotency_key
                           AND k.operation = 'createPayment' AND k.status = 'completed'
                           AND k.response_status = 201)
    )::bigint AS rows_without_key,
    (SELECT count(*) FROM (SELECT 1 FROM payments
                            GROUP BY idempotency_scope, idempotency_key
                            HAVING count(*) > 1) d
    )::bigint AS keys_with_several_rows;

-- name: AuditPaymentSamples :many
(SELECT 'key without a row'::text AS problem, k.scope, k.key
   FROM idempotency_keys k
  WHERE k.operation = 'createPayment' AND k.status = 'completed' AND k.response_status = 201
    AND NOT EXISTS (SELECT 1 FROM payments p
                     WHERE p.account_id = k.scope AND p.idempotency_scope = k.scope AND p.idempotency_key = k.key)
  ORDER BY k.scope, k.key LIMIT sqlc.arg(max_samples))
UNION ALL
(SELECT DISTINCT 'row without a key'::text, p.idempotency_scope, p.idempotency_key
   FROM payments p
  WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k
                     WHERE k.scope = p.account_id AND k.scope = p.idempotency_scope AND k.key = p.idempotency_key
                       AND k.operation = 'createPayment' AND k.status = 'completed'
                       AND k.response_status = 201)
  ORDER BY p.idempotency_scope, p.idempotency_key LIMIT sqlc.arg(max_samples))
UNION ALL
(SELECT 'key with several rows'::text, idempotency_scope, idempotency_key
   FROM payments
  GROUP BY idempotency_scope, idempotency_key
 HAVING count(*) > 1
  ORDER BY idempotency_scope, idempotency_key LIMIT sqlc.arg(max_samples));

-- name: AuditRefunds :one
SELECT
    (SELECT count(*) FROM idempotency_keys k
      WHERE k.operation = 'createRefund' AND k.status = 'completed' AND k.response_status = 201
    )::bigint AS created_keys,
    (SELECT count(*) FROM refunds)::bigint AS business_rows,
    (SELECT count(*) FROM idempotency_keys k
      WHERE k.operation = 'createRefund' AND k.status = 'completed' AND k.response_status = 201
        AND NOT EXISTS (SELECT 1 FROM refunds r
                         WHERE r.account_id = k.scope AND r.idempotency_scope = k.scope AND r.idempotency_key = k.key)
    )::bigint AS keys_without_row,
    (SELECT count(*) FROM refunds r
      WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k
                         WHERE k.scope = r.account_id AND k.scope = r.idempotency_scope AND k.key = r.idempotency_key
                           AND k.operation = 'createRefund' AND k.status = 'completed'
                           AND k.response_status = 201)
    )::bigint AS rows_without_key,
    (SELECT count(*) FROM (SELECT 1 FROM refunds
                            GROUP BY idempotency_scope, idempotency_key
                            HAVING count(*) > 1) d
    )::bigint AS keys_with_several_rows;

-- name: AuditRefundSamples :many
(SELECT 'key without a row'::text AS problem, k.scope, k.key
   FROM idempotency_keys k
  WHERE k.operation = 'createRefund' AND k.status = 'completed' AND k.response_status = 201
    AND NOT EXISTS (SELECT 1 FROM refunds r
                     WHERE r.account_id = k.scope AND r.idempotency_scope = k.scope AND r.idempotency_key = k.key)
  ORDER BY k.scope, k.key LIMIT sqlc.arg(max_samples))
UNION ALL
(SELECT DISTINCT 'row without a key'::text, r.idempotency_scope, r.idempotency_key
   FROM refunds r
  WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k
                     WHERE k.scope = r.account_id AND k.scope = r.idempotency_scope AND k.key = r.idempotency_key
                       AND k.operation = 'createRefund' AND k.status = 'completed'
                       AND k.response_status = 201)
  ORDER BY r.idempotency_scope, r.idempotency_key LIMIT sqlc.arg(max_samples))
UNION ALL
(SELECT 'key with several rows'::text, idempotency_scope, idempotency_key
   FROM refunds
  GROUP BY idempotency_scope, idempotency_key
 HAVING count(*) > 1
  ORDER BY idempotency_scope, idempotency_key LIMIT sqlc.arg(max_samples));

-- name: StarPayment :one
-- One autocommitted statement: the star is counted (committed) before the Redis store
-- completes the key. No row: no such payment in the account. On Citus the INSERT ...
-- SELECT runs on the account's shard when planned with its values: the service sends it
-- in the simple protocol (SimpleProtocol), since Citus plans it generically with
-- parameters not at all ("could not create distributed plan").
INSERT INTO payment_stars (account_id, payment_id, stars)
SELECT p.account_id, p.id, 1 FROM payments p WHERE p.account_id = sqlc.arg(account_id) AND p.id = sqlc.arg(id)
ON CONFLICT (account_id, payment_id) DO UPDATE SET stars = payment_stars.stars + 1
RETURNING payment_id, stars;
