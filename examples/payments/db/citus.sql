-- Distributes the payments example on Citus by tenant: run on the coordinator after the
-- migrations (idem.Migrate and db.Migrate, i.e. after the server started once through the
-- coordinator): psql "$COORDINATOR_URL" -f citus.sql, or db.Distribute. Re-runnable: a
-- table already distributed as below is left as it is; one distributed otherwise is
-- refused, with the statement that redistributes it (alter_distributed_table, which drops
-- the foreign keys it cannot keep while it works: check them afterwards).
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
DECLARE
    t      record;
    dist   text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'payments: citus.sql runs on a Citus coordinator; this database has no citus extension';
    END IF;
    IF NOT citus_is_coordinator() THEN
        RAISE EXCEPTION 'payments: citus.sql runs on the Citus coordinator, and this node is a worker';
    END IF;
    FOR t IN SELECT * FROM (VALUES (1, 'idempotency_keys', 'scope'), (2, 'payments', 'account_id'),
                                   (3, 'refunds', 'account_id'), (4, 'payment_stars', 'account_id')) AS v (n, tab, col)
             ORDER BY n LOOP
        SELECT column_to_column_name(p.logicalrelid, p.partkey) INTO dist
          FROM pg_dist_partition AS p WHERE p.logicalrelid = t.tab::regclass;
        IF NOT FOUND THEN
            IF t.tab = 'idempotency_keys' THEN
                PERFORM create_distributed_table(t.tab, t.col);
            ELSE
                PERFORM create_distributed_table(t.tab, t.col, colocate_with => 'idempotency_keys');
            END IF;
        ELSIF dist IS DISTINCT FROM t.col
              OR (t.tab <> 'idempotency_keys' AND NOT EXISTS (
                  SELECT 1 FROM pg_dist_partition AS a, pg_dist_partition AS b
                   WHERE a.logicalrelid = t.tab::regclass AND b.logicalrelid = 'idempotency_keys'::regclass
                     AND a.colocationid = b.colocationid)) THEN
            RAISE EXCEPTION 'payments: % is distributed by %, not by %', t.tab, coalesce(dist, '(none)'),
                            t.col || CASE WHEN t.tab = 'idempotency_keys' THEN '' ELSE ' co-located with idempotency_keys' END
                USING HINT = format('Redistribute it: SELECT alter_distributed_table(%L, distribution_column => %L%s);',
                                    t.tab, t.col, CASE WHEN t.tab = 'idempotency_keys' THEN '' ELSE ', colocate_with => ''idempotency_keys''' END);
        END IF;
    END LOOP;
END
$distribute$;
