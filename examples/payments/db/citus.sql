-- Distributes the payments example on Citus by tenant: run on the coordinator after the
-- migrations (idem.Migrate and db.Migrate, i.e. after the server started once through the
-- coordinator): psql "$COORDINATOR_URL" -f citus.sql, or db.Distribute. Re-runnable: a
-- table already distributed is left as it is.
--
-- idempotency_keys is distributed by scope (what `idemgen schema -citus` prints), and the
-- example's tables by account_id co-located with it: the scope is the account
-- (service/account.go), so a key's row and the rows its request writes live on the same
-- shard, and every request (a payment, a refund, a star, their replays) runs on one worker
-- with a one-phase commit. Tables holding rows are copied into their shards.
--
-- Order matters: a table is distributed after the tables it refers to (refunds and
-- payment_stars refer to payments).
DO $distribute$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'payments: citus.sql runs on a Citus coordinator; this database has no citus extension';
    END IF;
    IF NOT citus_is_coordinator() THEN
        RAISE EXCEPTION 'payments: citus.sql runs on the Citus coordinator, and this node is a worker';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'idempotency_keys'::regclass) THEN
        PERFORM create_distributed_table('idempotency_keys', 'scope');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'payments'::regclass) THEN
        PERFORM create_distributed_table('payments', 'account_id', colocate_with => 'idempotency_keys');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'refunds'::regclass) THEN
        PERFORM create_distributed_table('refunds', 'account_id', colocate_with => 'idempotency_keys');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'payment_stars'::regclass) THEN
        PERFORM create_distributed_table('payment_stars', 'account_id', colocate_with => 'idempotency_keys');
    END IF;
END
$distribute$;
