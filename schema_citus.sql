-- idemgen: idempotency_keys on a Citus cluster (`idemgen schema -citus`).
-- Run on the coordinator after schema.sql (idem.Migrate, `idemgen schema` or migrations/),
-- with the citus extension created and the workers added. Re-runnable: a table already
-- distributed is left as it is.
--
-- The table is distributed by scope, the value idem.WithScope returns for a request (the
-- tenant: an account, an organization). Every statement idem sends names scope and key by
-- equality, so each runs on the one shard that holds the key, and the claim's lock is taken
-- on that shard's node whichever node the request entered through.
DO $citus$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                   WHERE logicalrelid = 'idempotency_keys'::regclass) THEN
        PERFORM create_distributed_table('idempotency_keys', 'scope');
    END IF;
END
$citus$;

-- Your own tables: distribute each by the same tenant column, co-located with
-- idempotency_keys, so that a request's business statements run on the key's shard and its
-- transaction commits in one phase on one worker (no PREPARE TRANSACTION):
--
--   SELECT create_distributed_table('payments', 'account_id', colocate_with => 'idempotency_keys');
--
-- For that, each table's primary and unique keys include the tenant column (PRIMARY KEY
-- (account_id, id)), its foreign keys do too (REFERENCES payments (account_id, id)), every
-- statement of a request names the tenant by equality (WHERE account_id = $1 AND id = $2),
-- and joins between distributed tables are on the tenant columns. A statement that does
-- not name the tenant runs on every shard; one that writes through several shards commits
-- in two phases. idem refuses SERIALIZABLE on Citus (idem.ErrSerializableOnCitus): use
-- READ COMMITTED or REPEATABLE READ. The example's db/citus.sql does all of this for its
-- tables.
