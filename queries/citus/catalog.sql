-- Not a schema to apply: the columns of the two cluster-wide views of Citus (13.x) that
-- idem's monitoring reads, declared here only so that sqlc can type the queries of
-- queries/citus/ (Citus creates the views in pg_catalog with `CREATE EXTENSION citus`).
-- Sources: https://docs.citusdata.com/en/stable/develop/api_metadata.html (citus_locks,
-- citus_stat_activity) and the views' definitions in Citus's src/backend/distributed/sql.
CREATE TABLE citus_locks (
    global_pid bigint,
    nodeid     integer,
    locktype   text,
    database   oid,
    classid    oid,
    objid      oid,
    objsubid   smallint,
    pid        integer,
    mode       text,
    granted    boolean
);

CREATE TABLE citus_stat_activity (
    global_pid       bigint,
    nodeid           integer,
    is_worker_query  boolean,
    datname          name,
    pid              integer,
    application_name text,
    client_addr      inet,
    xact_start       timestamptz,
    state_change     timestamptz,
    state            text
);
