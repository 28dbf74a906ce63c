-- Monitoring on a Citus cluster (the citus extension is installed): the claims held on
-- every node, not only the node the query entered through. A claim's lock is taken on the
-- node that holds the key's shard, by a backend working for the request's session on its
-- entry node (the same global_pid); these queries report that session (its node, pid,
-- client and transaction), whichever node holds the lock. Read by Store.HeldClaims and
-- Store.StaleClaims in place of HeldClaims and CountStaleClaims of queries/.

-- Claims held now on any node of the cluster, oldest first (the columns of HeldClaims,
-- plus the entry session's node id and global pid).
-- name: ClusterHeldClaims :many
SELECT a.pid::int AS pid,
       a.nodeid::int AS node_id,
       a.global_pid::bigint AS global_pid,
       ((l.classid::bigint << 32) | l.objid::bigint)::bigint AS lock_id,
       coalesce(a.state, '')::text AS state,
       coalesce(a.application_name, '')::text AS application_name,
       coalesce(host(a.client_addr), '')::text AS client_addr,
       a.xact_start::timestamptz AS xact_start,
       (extract(epoch FROM now() - a.xact_start) * 1000000)::bigint AS held_us,
       (CASE WHEN a.state LIKE 'idle in transaction%'
             THEN extract(epoch FROM now() - a.state_change) * 1000000 ELSE 0 END)::bigint AS idle_us
FROM citus_locks AS l
JOIN citus_stat_activity AS a ON a.global_pid = l.global_pid AND NOT a.is_worker_query
WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
  AND a.datname = current_database()
ORDER BY a.xact_start, a.global_pid;

-- Claims held on any node for longer than stale_us, counted as ClusterHeldClaims finds them.
-- name: CountClusterStaleClaims :one
SELECT count(*)::bigint AS stale
FROM citus_locks AS l
JOIN citus_stat_activity AS a ON a.global_pid = l.global_pid AND NOT a.is_worker_query
WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
  AND a.datname = current_database()
  AND a.xact_start <= now() - sqlc.arg(stale_us)::bigint * interval '1 microsecond';

-- Whether the database is a Citus cluster node (the extension is installed).
-- name: IsCitus :one
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')::boolean AS citus;
