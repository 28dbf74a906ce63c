-- idemgen migration 00001: the idempotency_keys table and its indexes.
-- Released migrations are never edited: a change to the table is a new numbered file.
-- IF NOT EXISTS lets a database where idem.Migrate already made the table adopt it.

CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope            text        NOT NULL,
    key              text        NOT NULL,
    operation        text        NOT NULL,
    fingerprint      bytea       NOT NULL,
    status           text        NOT NULL CHECK (status IN ('processing', 'completed')),
    -- fencing token: a new random value from the client on every claim, takeover and
    -- reclaim (so the claim, BEGIN and the own-row lock can travel in one flight).
    lease_token      bigint      NOT NULL,
    leased_until     timestamptz NOT NULL,
    response_status  integer,
    -- ordered header lines: [["Content-Type","application/json"],["Location","/payments/1"]]
    response_headers jsonb,
    response_body    bytea,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);

-- purge of expired rows in batches
CREATE INDEX IF NOT EXISTS idempotency_keys_expires_at_idx
    ON idempotency_keys (expires_at);

-- processing rows past their lease (a metric; a stuck claim is reclaimed by the next retry)
CREATE INDEX IF NOT EXISTS idempotency_keys_processing_leased_until_idx
    ON idempotency_keys (leased_until) WHERE status = 'processing';

-- recent claims, for the payloads seen under several keys within a window (clients that
-- mint a new key per retry). Appended to in time order, as expires_at is: of the indexes
-- a claim writes, only the primary key takes a random page.
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at_idx
    ON idempotency_keys (created_at);
