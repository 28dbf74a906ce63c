-- idemgen: the idempotency_keys table.
-- Re-runnable (IF NOT EXISTS everywhere): idem.Migrate applies it on start for quick starts;
-- `idemgen schema` prints it for your migration tool.
--
-- One row per (scope, key). status 'processing' means a request holds the claim
-- (lease_token, until leased_until); 'completed' means the business transaction committed
-- and response_* is the answer replayed to retries until expires_at. All times are taken
-- from the database clock.

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
