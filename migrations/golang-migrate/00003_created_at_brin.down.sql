-- idemgen migration 00003, down: the created_at index as a btree again.

DROP INDEX IF EXISTS idempotency_keys_created_at_btree_idx;

CREATE INDEX idempotency_keys_created_at_btree_idx
    ON idempotency_keys (created_at);

DROP INDEX IF EXISTS idempotency_keys_created_at_idx;

ALTER INDEX idempotency_keys_created_at_btree_idx RENAME TO idempotency_keys_created_at_idx;
