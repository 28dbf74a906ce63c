-- idemgen migration 00003, down: the created_at index as a btree again.

DROP INDEX IF EXISTS idempotency_keys_created_at_idx;

CREATE INDEX idempotency_keys_created_at_idx
    ON idempotency_keys (created_at);
