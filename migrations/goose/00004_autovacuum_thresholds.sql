-- idemgen migration 00004: the table's own autovacuum thresholds, in rows (see the CHANGELOG).
-- PostgreSQL's default waits for dead rows to reach 20 % of the table before it vacuums:
-- 17M rows at 86M (1,000 requests/s, 24 h retention), hours of purge while inserts grow the
-- heap past them. These settings start a vacuum after 50,000 dead rows (~50 s of purge at
-- 1,000 rows/s), and after 100,000 inserted rows, whatever the table's size. SET on storage
-- parameters takes a SHARE UPDATE EXCLUSIVE lock: reads and writes go on; it waits only for
-- a running vacuum or DDL. On Citus, run it through the coordinator: it sets every shard.

-- +goose Up
ALTER TABLE idempotency_keys SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000,
                                     autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 100000);

-- +goose Down
ALTER TABLE idempotency_keys RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
                                       autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold);
