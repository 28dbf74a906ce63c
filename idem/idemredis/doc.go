// Package idemredis is an idempotency key store in Redis, for operations whose rare
// desync is acceptable: a like, a follow, a star, a subscription toggle, a notification
// preference. Money goes to the PostgreSQL store (package idem), where the key commits in
// the business transaction and a rollback always takes the key with it.
//
// It lives in a module of its own (github.com/idemgen/idemgen/idem/idemredis): a service
// requires it, and go-redis, only when it uses Redis.
//
// # Client
//
// The store takes a go-redis v9 client (redis.UniversalClient: *redis.Client,
// *redis.ClusterClient, or a Sentinel *redis.FailoverClient). go-redis rather than
// rueidis: it is the client the teams this store is for already run for sessions, caches
// and rate limits (one client, one pool, one set of timeouts and metrics in the
// service), it covers standalone, Sentinel and Cluster behind one interface, and its
// Script runs EVALSHA with the EVAL fallback a restarted server needs. rueidis' strengths
// (auto-pipelining, client-side caching) matter little here: each request makes one
// claim and one completion, scripts that cannot be cached client-side.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	store, err := idemredis.New(ctx, rdb, idemredis.WithObserver(outcomes.Observe))
//
// # The protocol
//
// Each (scope, key) has one Redis string, its record, under the key
// "idem:{<hex SHA-256 of scope and key>}" ([WithPrefix] changes "idem:"). The braces are
// its Redis Cluster hash tag: every record of a key is in one hash slot, and each script
// touches that one key.
//
//  1. The key and the request are validated and fingerprinted as by the PostgreSQL store
//     (idem.ParseKey, the policy's KeySchema, idem.Fingerprint): 400 before any Redis call.
//  2. Claim: one script runs SET key <claim> NX PX <lease>, the claim carrying a fresh
//     128-bit random token (the fencing token), the fingerprint and the operation. When
//     the key is held, the same atomic step returns the record and its PTTL:
//     another operation or fingerprint → 422; a completed record → its replay (same
//     status, stored header lines, byte-identical body, Idempotent-Replayed: true); a
//     claim → 409 with Retry-After the claim's remaining lease, by the Redis server's
//     clock (or, with [WithWait], polling every 20 ms up to the wait for the owner's
//     answer).
//  3. Business: the [Func] runs under the request's context (idem.KeyFromContext gives
//     the key), bounded by the policy's Timeout. It gets no transaction.
//  4. Completion: a script replaces the claim with the completed record, the retention
//     as its TTL (PX), only if the record still carries our token. A newer owner's claim
//     (our lease ran out and a retry claimed the key) is never overwritten: the
//     completion is refused ([ErrFenced]), observed as [OutcomeFenced] then
//     [OutcomeCompletionLost], logged, and the client still gets the business's own
//     response (it did run). A key whose lease ran out with no one claiming it since is
//     completed all the same ([OutcomeLateCompletion]).
//  5. A business error, a panic, or a response that is not cacheable (5xx by default):
//     a script deletes the claim if it still carries our token, and a retry runs at once
//     (if Redis fails the release, the claim blocks retries, 409, until its lease ends).
//
// All times are the Redis server's: the lease and the retention are TTLs it keeps, and a
// 409's Retry-After comes from its PTTL. The outcomes (idem.Outcome, plus the ones this
// package adds) go to the same observer, and the spans (idem.Span) are the PostgreSQL
// store's, so dashboards and alerts serve both.
//
// # Desync
//
// The business finishes (commits, where it writes to a database) before the key
// completes. So the only desync is a retry that runs the business again: the business
// finished but its completion was lost, because Redis failed or restarted empty, or the
// lease ran out during the business and a duplicate claimed the key. A replayed success
// whose business did not happen cannot occur: a failed business releases its claim and
// records nothing.
//
// # Redis down
//
// A claim Redis does not answer (down, timed out, out of memory under noeviction) is a
// 503 with Retry-After ([WithUnavailableRetryAfter], default 1 s), [OutcomeUnavailable],
// and the business does not run: the store never runs a business unprotected. A Redis
// that restarts without persistence has lost every claim and record: a retry of a key
// answered before the restart runs again, and a request running during the restart may
// run again too (its completion then lands on an empty key, or is fenced by the retry's
// claim). With AOF (appendfsync everysec) at most about a second of completions is lost;
// after a Sentinel or Cluster failover, what had not yet reached the replica.
//
// # Eviction: refuse to start
//
// [New] reads maxmemory-policy on every server (every master of a cluster) and refuses
// to start, with an error wrapping [ErrEvictingPolicy], unless it is noeviction. Every
// record this store writes has a TTL, so a volatile-* policy evicts them like an
// allkeys-* one does, and volatile-ttl evicts running claims (the shortest TTLs) first;
// an evicted claim or record lets the next retry run the business again, silently.
// Under noeviction a full server refuses new claims instead, and the store answers 503:
// a loud, bounded failure rather than a quiet duplicate. A warning would be read after
// the duplicates. A team that shares a cache server with an LRU policy and accepts the
// duplicates says so with [AllowEvictingPolicy] (logged at level Error at start); the
// same option covers a managed Redis that forbids CONFIG. A policy changed at runtime is
// not detected.
//
// # Leases
//
// The lease is the claim's TTL: a service killed mid-business frees its keys when their
// leases end, and the retry then runs once. The lease is not extended while the
// business runs: give an operation a lease longer than its timeout, or a business that
// outlives its lease may run twice (fenced, counted, never overwriting the newer owner).
package idemredis
