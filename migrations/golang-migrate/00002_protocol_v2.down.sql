-- idemgen migration 00002, down: v1's index of unfinished claims back, no defaults (run v1
-- code only after this).

CREATE INDEX IF NOT EXISTS idempotency_keys_unfinished_leased_until_idx
    ON idempotency_keys (leased_until) WHERE completed_at IS NULL;

ALTER TABLE idempotency_keys ALTER COLUMN lease_token DROP DEFAULT,
                             ALTER COLUMN leased_until DROP DEFAULT;
