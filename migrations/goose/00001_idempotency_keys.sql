-- idemgen migration 00001: the idempotency_keys table and its indexes.
-- Released migrations are never edited: a change to the table is a new numbered file.
-- IF NOT EXISTS lets a database where idem.Migrate already made the table adopt it.

-- +goose Up
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

-- claims not completed whose lease ended (the stale-claims gauge; a stuck claim is
-- reclaimed by the next retry). The predicate is completed_at IS NULL, which holds exactly
-- for processing rows, and not status = 'processing': the protocol's statements on one
-- key say status = 'processing', and an index whose predicate they imply is one the
-- planner may pick for them on a small table, then filter every claim it holds for the
-- key (idem's TestKeyStatementsUseThePrimaryKey).
CREATE INDEX IF NOT EXISTS idempotency_keys_unfinished_leased_until_idx
    ON idempotency_keys (leased_until) WHERE completed_at IS NULL;

-- recent claims, for the payloads seen under several keys within a window (clients that
-- mint a new key per retry). Appended to in time order, as expires_at is: of the indexes
-- a claim writes, only the primary key takes a random page.
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at_idx
    ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE IF EXISTS idempotency_keys;
