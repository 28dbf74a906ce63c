-- idemgen: the idempotency_keys table.
-- Re-runnable (IF NOT EXISTS everywhere): idem.Migrate applies it on start for quick starts;
-- `idemgen schema` prints it for your migration tool.
--
-- One row per (scope, key), written in the request's own business transaction and born
-- 'completed' (protocol v2): response_* is the answer replayed to retries until expires_at.
-- A request in flight has no committed row: it holds a transaction-scoped advisory lock on
-- (scope, key) instead, so a rollback or a crash takes the claim with it. All times are
-- taken from the database clock.

-- On a Citus worker the table is made through the coordinator, where it is distributed
-- (`idemgen schema -citus`): made on a worker, it would be that node's table alone. Once it
-- exists, this file runs through any node (it changes nothing there).
DO $citus$
DECLARE
    coordinator boolean;
BEGIN
    IF to_regclass('idempotency_keys') IS NULL
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        EXECUTE 'SELECT citus_is_coordinator()' INTO coordinator;
        IF NOT coordinator THEN
            RAISE EXCEPTION 'idem: idempotency_keys does not exist, and this node is a Citus worker'
                USING HINT = 'Create and distribute it through the coordinator (idemgen schema, then idemgen schema -citus), then start again.';
        END IF;
    END IF;
END
$citus$;

CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope            text        NOT NULL,
    key              text        NOT NULL,
    operation        text        NOT NULL,
    fingerprint      bytea       NOT NULL,
    -- 'completed' on every committed row v2 writes. 'processing' is only ever committed by
    -- v1 (its claim rows, in tables created before v2); v2 takes such a row over once its
    -- lease ended, and writes 'processing' only inside a transaction that has not committed.
    status           text        NOT NULL CHECK (status IN ('processing', 'completed')),
    -- v1's fencing token and lease end. v2 has neither: its rows get 0 and their write
    -- time, so that v1 replicas still read them during a rolling upgrade.
    lease_token      bigint      NOT NULL DEFAULT 0,
    leased_until     timestamptz NOT NULL DEFAULT now(),
    response_status  integer,
    -- ordered header lines: [["Content-Type","application/json"],["Location","/payments/1"]]
    response_headers jsonb,
    response_body    bytea,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);

-- Upgrade of a v1 table (a no-op on a table this file created; migration 00002 does the
-- same): v2 writes no fencing token and no lease, so those columns get the defaults above,
-- and v1's index of unfinished claims goes (v2 commits none; the v1 rows left 'processing'
-- are taken over by the next request once their lease ended, or purged once past
-- retention). Checked first, so that a re-run takes no ACCESS EXCLUSIVE lock on a table in
-- use.
DO $upgrade$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute AS a
               WHERE a.attrelid = 'idempotency_keys'::regclass AND a.attname IN ('lease_token', 'leased_until')
                 AND NOT a.attisdropped AND NOT a.atthasdef) THEN
        ALTER TABLE idempotency_keys ALTER COLUMN lease_token SET DEFAULT 0,
                                     ALTER COLUMN leased_until SET DEFAULT now();
    END IF;
    IF to_regclass('idempotency_keys_unfinished_leased_until_idx') IS NOT NULL THEN
        DROP INDEX idempotency_keys_unfinished_leased_until_idx;
    END IF;
    -- Migration 00003: the created_at index becomes a BRIN index. Built first under
    -- another name (the build blocks writes, not reads), then the btree is dropped: its
    -- ACCESS EXCLUSIVE lock, which blocks reads too, is held from there to the commit only.
    IF EXISTS (SELECT 1 FROM pg_class AS c JOIN pg_am AS am ON am.oid = c.relam
               WHERE c.oid = to_regclass('idempotency_keys_created_at_idx') AND am.amname = 'btree') THEN
        DROP INDEX IF EXISTS idempotency_keys_created_at_brin_idx;
        CREATE INDEX idempotency_keys_created_at_brin_idx ON idempotency_keys USING brin (created_at);
        DROP INDEX idempotency_keys_created_at_idx;
        ALTER INDEX idempotency_keys_created_at_brin_idx RENAME TO idempotency_keys_created_at_idx;
    END IF;
END
$upgrade$;

-- The table's own autovacuum thresholds, in rows rather than PostgreSQL's default 20 % of
-- the table: the purge deletes as many rows as the service writes (86M a day at 1,000
-- requests/s and 24 h retention), and at 20 % a vacuum would wait for 17M dead rows (10 GB
-- of dead heap, ~4 hours of purge) while inserts grow the table past them. With a fixed
-- threshold, vacuum comes after 50,000 dead rows whatever the size: ~50 s of purge at
-- 1,000 rows/s, ~30 MB of dead rows that the next inserts reuse; 0.06 % of an 86M-row
-- table, 0.5 % of a 10M-row one. Lower thresholds start vacuums more often, each of which
-- reads every index of the table once (the primary key: ~6 GB at 86M rows); on a table that
-- large vacuum then runs about back to back, which is what keeps the heap flat. Inserted
-- rows likewise: every 100,000 (the first day, before anything expires, or a table whose
-- keys outlive their writes) a vacuum marks the new pages all-visible, so the next ones
-- skip them. Options the table already has are left as they are (a value an operator set
-- stays); only missing ones are set, checked first so that a re-run takes no lock. On a
-- Citus worker they cannot be set (it refuses DDL on a distributed table): run this file
-- through the coordinator once, which sets them on every shard.
DO $autovacuum$
DECLARE
    missing     text[];
    coordinator boolean;
BEGIN
    SELECT array_agg(o ORDER BY o) INTO missing
    FROM unnest(ARRAY['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=50000',
                      'autovacuum_vacuum_insert_scale_factor=0', 'autovacuum_vacuum_insert_threshold=100000']) AS o
    WHERE NOT EXISTS (SELECT 1 FROM pg_class AS c, unnest(c.reloptions) AS r
                      WHERE c.oid = 'idempotency_keys'::regclass AND split_part(r, '=', 1) = split_part(o, '=', 1));
    IF missing IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        EXECUTE 'SELECT citus_is_coordinator()' INTO coordinator;
        IF NOT coordinator THEN
            RAISE NOTICE 'idem: idempotency_keys lacks its autovacuum settings (%), which a Citus worker cannot set', array_to_string(missing, ', ')
                USING HINT = 'Run idem.Migrate (or schema.sql) through the coordinator once.';
            RETURN;
        END IF;
    END IF;
    EXECUTE format('ALTER TABLE idempotency_keys SET (%s)', array_to_string(missing, ', '));
END
$autovacuum$;

-- purge of expired rows in batches. The indexes are created only when missing, checked
-- first rather than with CREATE INDEX IF NOT EXISTS: on a Citus worker any CREATE INDEX on
-- a distributed table is refused, even one that would be skipped, and a service whose pool
-- points at a worker runs this file on start too.
DO $indexes$
BEGIN
    IF to_regclass('idempotency_keys_expires_at_idx') IS NULL THEN
        CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
    END IF;

    -- recent keys, for the payloads seen under several keys within a window (clients that
    -- mint a new key per retry; read by the repeated-payload gauge only). Rows are appended in
    -- created_at order, so a BRIN index (block ranges with their min and max) finds the recent
    -- ones: the tail of the table, whose ranges are not yet summarized and always scanned. It
    -- costs a completion no index entry and no WAL record, where a btree took one of each on
    -- its hottest page (the right edge, shared by every concurrent completion).
    IF to_regclass('idempotency_keys_created_at_idx') IS NULL THEN
        CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys USING brin (created_at);
    END IF;
END
$indexes$;
