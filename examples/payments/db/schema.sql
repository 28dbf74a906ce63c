-- The payments example's business tables. Re-runnable: the server applies it on start with
-- db.Migrate, after idem.Migrate, through whichever node its pool points at.
--
-- Each business row records the idempotency scope and key of the request that created it.
-- That is not how duplicates are prevented (the idempotency protocol is: the row and the
-- key's completion commit in one transaction); there is deliberately no UNIQUE constraint
-- on them. It is what lets the audit (queries.sql) prove exactly-once from the data:
-- every completed key has exactly one row, and every row has a completed key.
--
-- Every table is keyed by its account, the tenant: primary keys start with account_id,
-- and refunds and stars refer to their payment by (account_id, payment_id). The account
-- is also the idempotency scope (service/account.go), so on Citus (citus.sql) every table
-- is distributed by account_id co-located with idempotency_keys (by scope): a request's
-- rows and its key live on one shard, and each request is a one-phase commit on one worker.
-- On one PostgreSQL the layout changes nothing a client sees.
--
-- Databases made before that layout (payments keyed by id alone, refunds and stars without
-- an account) are upgraded in place by the $upgrade$ block below. The example's data is
-- disposable: dropping its tables (payments, refunds, payment_stars) and starting again
-- does as well.

-- On a Citus worker the tables are made through the coordinator, where citus.sql
-- distributes them: made on a worker, they would be that node's tables alone. Once they
-- exist, this file runs through any node (it changes nothing there).
DO $citus$
DECLARE
    coordinator boolean;
BEGIN
    IF (to_regclass('payments') IS NULL OR to_regclass('refunds') IS NULL OR to_regclass('payment_stars') IS NULL)
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        EXECUTE 'SELECT citus_is_coordinator()' INTO coordinator;
        IF NOT coordinator THEN
            RAISE EXCEPTION 'payments: the example''s tables do not exist, and this node is a Citus worker'
                USING HINT = 'Start the server once through the coordinator, apply examples/payments/db/citus.sql there, then start again.';
        END IF;
    END IF;
END
$citus$;

CREATE TABLE IF NOT EXISTS payments (
    id                text        NOT NULL DEFAULT 'pay_' || replace(gen_random_uuid()::text, '-', ''),
    account_id        text        NOT NULL,
    amount            bigint      NOT NULL CHECK (amount > 0),
    currency          text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    description       text,
    -- sum of the refunds' amounts; status is derived from it
    amount_refunded   bigint      NOT NULL DEFAULT 0 CHECK (amount_refunded BETWEEN 0 AND amount),
    idempotency_scope text        NOT NULL,
    idempotency_key   text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, id)
);

-- Upgrade of the earlier layout (PRIMARY KEY (id) on payments; refunds and payment_stars
-- referring to payments (id), without account_id): each refund and star gets its payment's
-- account, and every key and reference is remade with it. Checked first, so that a re-run
-- takes no ACCESS EXCLUSIVE lock on tables in use.
DO $upgrade$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint AS c
                   JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                   WHERE c.conrelid = 'payments'::regclass AND c.contype = 'p' AND a.attname = 'account_id') THEN
        -- CASCADE drops the references of refunds and payment_stars too: remade below.
        ALTER TABLE payments DROP CONSTRAINT payments_pkey CASCADE;
        ALTER TABLE payments ADD PRIMARY KEY (account_id, id);
        IF to_regclass('refunds') IS NOT NULL THEN
            ALTER TABLE refunds ADD COLUMN IF NOT EXISTS account_id text;
            UPDATE refunds AS r SET account_id = p.account_id FROM payments AS p WHERE p.id = r.payment_id;
            ALTER TABLE refunds ALTER COLUMN account_id SET NOT NULL,
                                DROP CONSTRAINT refunds_pkey,
                                ADD PRIMARY KEY (account_id, id),
                                ADD FOREIGN KEY (account_id, payment_id) REFERENCES payments (account_id, id);
            DROP INDEX IF EXISTS refunds_payment_id_idx; -- on (payment_id): remade on (account_id, payment_id) below
        END IF;
        IF to_regclass('payment_stars') IS NOT NULL THEN
            ALTER TABLE payment_stars ADD COLUMN IF NOT EXISTS account_id text;
            UPDATE payment_stars AS s SET account_id = p.account_id FROM payments AS p WHERE p.id = s.payment_id;
            ALTER TABLE payment_stars ALTER COLUMN account_id SET NOT NULL,
                                      DROP CONSTRAINT payment_stars_pkey,
                                      ADD PRIMARY KEY (account_id, payment_id),
                                      ADD FOREIGN KEY (account_id, payment_id) REFERENCES payments (account_id, id);
        END IF;
    END IF;
END
$upgrade$;

CREATE TABLE IF NOT EXISTS refunds (
    id                text        NOT NULL DEFAULT 're_' || replace(gen_random_uuid()::text, '-', ''),
    account_id        text        NOT NULL,
    payment_id        text        NOT NULL,
    amount            bigint      NOT NULL CHECK (amount > 0),
    idempotency_scope text        NOT NULL,
    idempotency_key   text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, id),
    FOREIGN KEY (account_id, payment_id) REFERENCES payments (account_id, id)
);

-- Stars of a payment (POST /payments/{id}/star): a like-style counter whose idempotency
-- keys live in Redis (x-idempotent store: redis), not in this database. A rare duplicate
-- counts a star twice; that is the trade-off the operation accepts, and why the stars
-- have no idempotency columns to audit.
CREATE TABLE IF NOT EXISTS payment_stars (
    account_id text   NOT NULL,
    payment_id text   NOT NULL,
    stars      bigint NOT NULL CHECK (stars > 0),
    PRIMARY KEY (account_id, payment_id),
    FOREIGN KEY (account_id, payment_id) REFERENCES payments (account_id, id)
);

-- The indexes are created only when missing, checked first rather than with CREATE INDEX
-- IF NOT EXISTS: on a Citus worker any CREATE INDEX on a distributed table is refused, even
-- one that would be skipped.
DO $indexes$
BEGIN
    -- the audit's lookups of a key's rows
    IF to_regclass('payments_idempotency_idx') IS NULL THEN
        CREATE INDEX payments_idempotency_idx ON payments (idempotency_scope, idempotency_key);
    END IF;
    IF to_regclass('refunds_idempotency_idx') IS NULL THEN
        CREATE INDEX refunds_idempotency_idx ON refunds (idempotency_scope, idempotency_key);
    END IF;
    -- a payment's refunds (and the check of the reference when a payment is deleted)
    IF to_regclass('refunds_payment_id_idx') IS NULL THEN
        CREATE INDEX refunds_payment_id_idx ON refunds (account_id, payment_id);
    END IF;
END
$indexes$;
