-- The payments example's business tables. Re-runnable (IF NOT EXISTS everywhere): the
-- server applies it on start with db.Migrate, after idem.Migrate.
--
-- Each business row records the idempotency scope and key of the request that created it.
-- That is not how duplicates are prevented (the idempotency protocol is: the row and the
-- key's completion commit in one transaction); there is deliberately no UNIQUE constraint
-- on them. It is what lets the audit (queries.sql) prove exactly-once from the data:
-- every completed key has exactly one row, and every row has a completed key.

CREATE TABLE IF NOT EXISTS payments (
    id                text        PRIMARY KEY DEFAULT 'pay_' || replace(gen_random_uuid()::text, '-', ''),
    account_id        text        NOT NULL,
    amount            bigint      NOT NULL CHECK (amount > 0),
    currency          text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    description       text,
    -- sum of the refunds' amounts; status is derived from it
    amount_refunded   bigint      NOT NULL DEFAULT 0 CHECK (amount_refunded BETWEEN 0 AND amount),
    idempotency_scope text        NOT NULL,
    idempotency_key   text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS payments_idempotency_idx
    ON payments (idempotency_scope, idempotency_key);

CREATE TABLE IF NOT EXISTS refunds (
    id                text        PRIMARY KEY DEFAULT 're_' || replace(gen_random_uuid()::text, '-', ''),
    payment_id        text        NOT NULL REFERENCES payments (id),
    amount            bigint      NOT NULL CHECK (amount > 0),
    idempotency_scope text        NOT NULL,
    idempotency_key   text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS refunds_payment_id_idx ON refunds (payment_id);

CREATE INDEX IF NOT EXISTS refunds_idempotency_idx
    ON refunds (idempotency_scope, idempotency_key);

-- Stars of a payment (POST /payments/{id}/star): a like-style counter whose idempotency
-- keys live in Redis (x-idempotent store: redis), not in this database. A rare duplicate
-- counts a star twice; that is the trade-off the operation accepts, and why the stars
-- have no idempotency columns to audit.
CREATE TABLE IF NOT EXISTS payment_stars (
    payment_id text   PRIMARY KEY REFERENCES payments (id),
    stars      bigint NOT NULL CHECK (stars > 0)
);
