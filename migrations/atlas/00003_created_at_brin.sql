-- idemgen migration 00003: the created_at index becomes a BRIN index (see the CHANGELOG).
-- Only the repeated-payload gauge reads it (the keys created within a window), and rows
-- are appended in created_at order: block ranges find them, and a completion no longer
-- writes an index entry and a WAL record on the btree's right edge, the page every
-- concurrent completion shared. The BRIN index is built first, under another name: the
-- build reads the whole table once and blocks writes (not reads) meanwhile, so apply it
-- off-peak on a large table. Then the btree is dropped and the new index renamed: the
-- drop's ACCESS EXCLUSIVE lock (which blocks every read of the table too) is held from
-- there to the migration's commit only, not during the build.

DROP INDEX IF EXISTS idempotency_keys_created_at_brin_idx;

CREATE INDEX idempotency_keys_created_at_brin_idx
    ON idempotency_keys USING brin (created_at);

DROP INDEX IF EXISTS idempotency_keys_created_at_idx;

ALTER INDEX idempotency_keys_created_at_brin_idx RENAME TO idempotency_keys_created_at_idx;
