-- idemgen migration 00004, down: PostgreSQL's default autovacuum settings again.

ALTER TABLE idempotency_keys RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
                                       autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold);
