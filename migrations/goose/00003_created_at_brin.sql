-- idemgen migration 00003: the created_at index becomes a BRIN index (see the CHANGELOG).
-- Only the repeated-payload gauge reads it (the keys created within a window), and rows
-- are appended in created_at order: block ranges find them, and a completion no longer
-- writes an index entry and a WAL record on the btree's right edge, the page every
-- concurrent completion shared. The drop takes an ACCESS EXCLUSIVE lock for a moment; the
-- BRIN build reads the whole table once and blocks writes meanwhile: apply it off-peak
-- on a large table.

-- +goose Up
DROP INDEX IF EXISTS idempotency_keys_created_at_idx;

CREATE INDEX idempotency_keys_created_at_idx
    ON idempotency_keys USING brin (created_at);

-- +goose Down
DROP INDEX IF EXISTS idempotency_keys_created_at_idx;

CREATE INDEX idempotency_keys_created_at_idx
    ON idempotency_keys (created_at);
