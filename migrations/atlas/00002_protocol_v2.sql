-- idemgen migration 00002: protocol v2 (one transaction per request; see the CHANGELOG).
-- v2 claims a key with a transaction-scoped advisory lock and writes its row born
-- completed: it has no fencing token and no lease, so lease_token and leased_until get
-- defaults (0 and the write time; v1 replicas still read v2 rows during a rolling
-- upgrade), and the index of unfinished claims goes. Rows v1 left processing are taken over
-- by the next request once their lease ended, or purged once past retention: none is
-- stuck. Apply it before deploying v2.

ALTER TABLE idempotency_keys ALTER COLUMN lease_token SET DEFAULT 0,
                             ALTER COLUMN leased_until SET DEFAULT now();

DROP INDEX IF EXISTS idempotency_keys_unfinished_leased_until_idx;
