package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen"
	"github.com/idemgen/idemgen/internal/citustest"
)

// The Citus suite: idem on a Citus cluster (IDEM_CITUS_URL, see internal/citustest), with
// idempotency_keys distributed by scope and the business table co-located with it. It
// skips without a cluster (CI has none).

// citusEnv is one test's database on the cluster, migrated and distributed.
type citusEnv struct {
	t       *testing.T
	cluster citustest.Cluster
	// prepares counts the PREPARE TRANSACTION (two-phase commits) that the nodes the pools
	// entered through issued for the pools' sessions (citus.log_remote_commands).
	prepares atomic.Int64
}

func newCitusEnv(t *testing.T) *citusEnv {
	t.Helper()
	e := &citusEnv{t: t, cluster: citustest.NewDB(t)}
	ctx := context.Background()
	pool := e.pool(e.cluster.Coordinator, nil)
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE business (scope text NOT NULL, id bigserial, key text, payload text NOT NULL, PRIMARY KEY (scope, id))`,
		idemgen.CitusSchema, // what `idemgen schema -citus` prints
		idemgen.CitusSchema, // re-runnable
		`SELECT create_distributed_table('business', 'scope', colocate_with => 'idempotency_keys')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return e
}

// pool is a pool on the node at url with the session settings params; its sessions log
// the commands their node sends to other nodes, counted in e.prepares when they prepare a
// transaction.
func (e *citusEnv) pool(url string, params map[string]string) *pgxpool.Pool {
	e.t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.MaxConns = 20
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "on"
	cfg.ConnConfig.RuntimeParams["client_min_messages"] = "notice"
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "PREPARE TRANSACTION") {
			e.prepares.Add(1)
		}
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	return pool
}

func (e *citusEnv) count(pool *pgxpool.Pool, q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// citusSettings are the session settings the suite runs under: the isolation level a
// transaction gets when BEGIN names none, and the plan cache mode.
var citusSettings = []struct {
	name   string
	params map[string]string
}{
	{"read-committed", map[string]string{}},
	{"repeatable-read", map[string]string{"default_transaction_isolation": "repeatable read"}},
	{"generic-plans", map[string]string{"plan_cache_mode": "force_generic_plan"}},
	{"repeatable-read+generic-plans", map[string]string{"default_transaction_isolation": "repeatable read", "plan_cache_mode": "force_generic_plan"}},
}

// TestCitusDuplicates releases 50 duplicates of one key, then 4 duplicates of each of 50
// keys, half through the coordinator and half through a worker, under each isolation
// level and plan cache mode: the business runs once per key, no answer is a 5xx, and no
// request commits in two phases.
func TestCitusDuplicates(t *testing.T) {
	e := newCitusEnv(t)
	for _, set := range citusSettings {
		t.Run(set.name, func(t *testing.T) {
			stores := [2]*Store{
				NewStore(e.pool(e.cluster.Coordinator, set.params), WithScope(tenant)),
				NewStore(e.pool(e.cluster.Workers[0], set.params), WithScope(tenant)),
			}
			before := e.prepares.Load()
			run := func(keys, dups int) {
				t.Helper()
				var calls atomic.Int64
				var mu sync.Mutex
				perKey := map[string]int{}
				business := func(ctx context.Context, tx Tx) (*Response, error) {
					calls.Add(1)
					k, _ := KeyFromContext(ctx)
					mu.Lock()
					perKey[k.Key]++
					mu.Unlock()
					return insertOne("x")(ctx, tx)
				}
				p := policy("createThing")
				n := keys * dups
				resps, errs := make([]*Response, n), make([]error, n)
				release(n, func(i int) {
					scope := fmt.Sprintf("tenant-%d", i%keys)
					ctx := withTenant(context.Background(), scope)
					key := fmt.Sprintf("%s/%d-%d", set.name, keys, i%keys)
					resps[i], errs[i] = stores[i%2].Do(ctx, p, ptr(key), parts("x"), business)
				})
				for i, r := range resps {
					if errs[i] != nil || r.Status >= 500 {
						t.Fatalf("call %d: %+v, %v", i, r, errs[i])
					}
				}
				if got := calls.Load(); got != int64(keys) {
					t.Fatalf("%d keys × %d: the business ran %d times (%v); want %d", keys, dups, got, perKey, keys)
				}
			}
			run(1, 50)
			run(50, 4)
			if got := e.prepares.Load() - before; got != 0 {
				t.Fatalf("%d PREPARE TRANSACTION during the requests; want 0 (every request single-shard, one phase)", got)
			}
		})
	}
}

type tenantKey struct{}

// withTenant is ctx whose requests have the scope tenant (read by the ScopeFunc tenant).
func withTenant(ctx context.Context, t string) context.Context {
	return context.WithValue(ctx, tenantKey{}, t)
}

func tenant(ctx context.Context) (string, error) {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t, nil
}

// TestCitusKeyReusedPastRetention completes a key, lets its retention pass, and sends the
// key again through each node and under each setting: the key is taken over (a new
// business run, 201), not refused.
func TestCitusKeyReusedPastRetention(t *testing.T) {
	e := newCitusEnv(t)
	coordinator := e.pool(e.cluster.Coordinator, nil)
	for _, set := range citusSettings {
		for node, url := range append([]string{e.cluster.Coordinator}, e.cluster.Workers...) {
			t.Run(fmt.Sprintf("%s/node-%d", set.name, node), func(t *testing.T) {
				store := NewStore(e.pool(url, set.params), WithScope(tenant))
				ctx := withTenant(context.Background(), "tenant-reuse")
				key := t.Name()
				p := policy("createThing")
				for round := range 2 {
					resp, err := store.Do(ctx, p, ptr(key), parts("x"), insertOne("x"))
					if err != nil || resp.Outcome != OutcomeCompleted {
						t.Fatalf("round %d: %+v, %v; want completed", round, resp, err)
					}
					if _, err := coordinator.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second'
						WHERE scope = $1 AND key = $2`, "tenant-reuse", key); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// TestCitusHeldClaims holds a claim (its business blocked) entered through a worker, and
// reads the held claims through the coordinator and through the other worker: every node
// sees it, with its entry session's node, and the key's state says it is held.
func TestCitusHeldClaims(t *testing.T) {
	e := newCitusEnv(t)
	ctx := withTenant(context.Background(), "tenant-held")
	owner := NewStore(e.pool(e.cluster.Workers[0], nil), WithScope(tenant))
	inside, unblock := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := owner.Do(ctx, policy("createThing"), ptr("held-key"), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
			close(inside)
			<-unblock
			return insertOne("x")(ctx, tx)
		})
		done <- err
	}()
	<-inside
	want := LockID("tenant-held", "held-key")
	for i, url := range append([]string{e.cluster.Coordinator}, e.cluster.Workers...) {
		store := NewStore(e.pool(url, nil), WithStaleAfter(time.Nanosecond))
		held, err := store.HeldClaims(context.Background())
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if len(held) != 1 || held[0].LockID != want || held[0].Node == 0 || held[0].GlobalPID == 0 {
			t.Fatalf("node %d: held claims %+v; want one, lock %d, with its node and global pid", i, held, want)
		}
		stale, err := store.StaleClaims(context.Background())
		if err != nil || stale != 1 {
			t.Fatalf("node %d: stale claims %d, %v; want 1 (stale after 1ns)", i, stale, err)
		}
		st, err := store.Key(context.Background(), "tenant-held", "held-key")
		if !st.Held || err != ErrKeyNotFound {
			t.Fatalf("node %d: key state %+v, %v; want held and no row yet", i, st, err)
		}
	}
	close(unblock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCitusMaintenanceUnderGenericPlans purges and reads repeated payloads through each
// node under force_generic_plan: the statements that scan every shard plan (the simple
// protocol), and do their work.
func TestCitusMaintenanceUnderGenericPlans(t *testing.T) {
	e := newCitusEnv(t)
	generic := map[string]string{"plan_cache_mode": "force_generic_plan"}
	coordinator := e.pool(e.cluster.Coordinator, generic)
	store := NewStore(coordinator, WithScope(tenant))
	ctx := withTenant(context.Background(), "tenant-purge")
	for i := range 3 {
		if resp, err := store.Do(ctx, policy("createThing"), ptr(fmt.Sprintf("k%d", i)), parts("same"), insertOne("same")); err != nil || resp.Outcome != OutcomeCompleted {
			t.Fatalf("%+v, %v", resp, err)
		}
	}
	for i, url := range append([]string{e.cluster.Coordinator}, e.cluster.Workers...) {
		s := NewStore(e.pool(url, generic))
		rep, err := s.RepeatedPayloads(context.Background(), time.Hour, 10)
		if err != nil || len(rep) != 1 || rep[0].Keys != 3 {
			t.Fatalf("node %d: repeated payloads %+v, %v; want one payload under 3 keys", i, rep, err)
		}
	}
	if _, err := coordinator.Exec(context.Background(), `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key <> 'k2'`); err != nil {
		t.Fatal(err)
	}
	n, err := NewStore(e.pool(e.cluster.Workers[1%len(e.cluster.Workers)], generic)).Purge(context.Background(), 1)
	if err != nil || n != 2 {
		t.Fatalf("purge: %d, %v; want 2 rows", n, err)
	}
	if got := e.count(coordinator, `SELECT count(*) FROM idempotency_keys`); got != 1 {
		t.Fatalf("%d rows left; want 1", got)
	}
}

// TestCitusMigrateThroughWorker runs Migrate through a worker of a database whose table is
// distributed (it succeeds: nothing to do), and through a worker of a database with no
// table (refused, with the reason: the table is made through the coordinator).
func TestCitusMigrateThroughWorker(t *testing.T) {
	e := newCitusEnv(t)
	if err := Migrate(context.Background(), e.pool(e.cluster.Workers[0], nil)); err != nil {
		t.Fatalf("Migrate through a worker, table distributed: %v", err)
	}
	fresh := citustest.NewDB(t)
	err := Migrate(context.Background(), e.pool(fresh.Workers[0], nil))
	if err == nil || !strings.Contains(err.Error(), "Citus worker") {
		t.Fatalf("Migrate through a worker, no table: %v; want the refusal that names the worker", err)
	}
	if err := Migrate(context.Background(), e.pool(fresh.Coordinator, nil)); err != nil {
		t.Fatalf("Migrate through the coordinator, no table: %v", err)
	}
}

// TestCitusTwoPhaseCommitsAreCounted is the check of the suite's two-phase commit count:
// with the business table distributed by another column than the key's scope, a request's
// business row and key row are on different shards, and commits do prepare.
func TestCitusTwoPhaseCommitsAreCounted(t *testing.T) {
	e := &citusEnv{t: t, cluster: citustest.NewDB(t)}
	ctx := context.Background()
	pool := e.pool(e.cluster.Coordinator, nil)
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE business (scope text NOT NULL, id bigserial PRIMARY KEY, key text, payload text NOT NULL)`,
		`SELECT create_distributed_table('idempotency_keys', 'scope')`,
		`SELECT create_distributed_table('business', 'id')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	store := NewStore(pool, WithScope(tenant))
	for i := range 20 {
		tctx := withTenant(ctx, fmt.Sprintf("tenant-%d", i))
		if _, err := store.Do(tctx, policy("createThing"), ptr("k"), parts("x"), insertOne("x")); err != nil {
			t.Fatal(err)
		}
	}
	if e.prepares.Load() == 0 {
		t.Fatal("20 requests with business rows on other shards than their keys: no PREPARE TRANSACTION counted")
	}
}

// TestCitusDuplicateThroughAnotherNodeIsBusy holds a claim entered through the coordinator
// (its business blocked) and sends its key through each worker, under each isolation
// level: the duplicate answers 409 at once, since the key's lock is taken on the node that
// holds the key's shard whichever node a request enters through.
func TestCitusDuplicateThroughAnotherNodeIsBusy(t *testing.T) {
	e := newCitusEnv(t)
	for _, level := range []string{"read committed", "repeatable read"} {
		t.Run(strings.ReplaceAll(level, " ", "-"), func(t *testing.T) {
			params := map[string]string{"default_transaction_isolation": level}
			owner := NewStore(e.pool(e.cluster.Coordinator, params), WithScope(tenant))
			ctx := withTenant(context.Background(), "tenant-busy")
			key := t.Name()
			inside, unblock := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := owner.Do(ctx, policy("createThing"), ptr(key), parts("x"), func(ctx context.Context, tx Tx) (*Response, error) {
					close(inside)
					<-unblock
					return insertOne("x")(ctx, tx)
				})
				done <- err
			}()
			<-inside
			for i, url := range e.cluster.Workers {
				dup := NewStore(e.pool(url, params), WithScope(tenant))
				// Bounded: a duplicate that waited for the owner's row instead would end here.
				dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				resp, err := dup.Do(dctx, policy("createThing"), ptr(key), parts("x"), insertOne("x"))
				cancel()
				if err != nil || resp.Outcome != OutcomeInProgress {
					t.Errorf("worker %d: %+v, %v; want 409 in progress while the owner holds the key", i, resp, err)
				}
			}
			close(unblock)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCitusRefusesSerializable sends a request whose transaction would run at SERIALIZABLE
// (the policy's level, then the session's default) and runs Migrate in a session whose
// default is SERIALIZABLE: each is refused with ErrSerializableOnCitus, and nothing ran.
func TestCitusRefusesSerializable(t *testing.T) {
	e := newCitusEnv(t)
	ctx := withTenant(context.Background(), "tenant-serial")
	ran := false
	business := func(ctx context.Context, tx Tx) (*Response, error) {
		ran = true
		return insertOne("x")(ctx, tx)
	}
	p := policy("createThing")
	p.Isolation = pgx.Serializable
	if _, err := NewStore(e.pool(e.cluster.Coordinator, nil), WithScope(tenant)).Do(ctx, p, ptr("k1"), parts("x"), business); !errors.Is(err, ErrSerializableOnCitus) {
		t.Fatalf("policy at SERIALIZABLE: %v; want ErrSerializableOnCitus", err)
	}
	serial := e.pool(e.cluster.Workers[0], map[string]string{"default_transaction_isolation": "serializable"})
	if _, err := NewStore(serial, WithScope(tenant)).Do(ctx, policy("createThing"), ptr("k2"), parts("x"), business); !errors.Is(err, ErrSerializableOnCitus) {
		t.Fatalf("default SERIALIZABLE: %v; want ErrSerializableOnCitus", err)
	}
	if err := Migrate(context.Background(), serial); !errors.Is(err, ErrSerializableOnCitus) {
		t.Fatalf("Migrate, default SERIALIZABLE: %v; want ErrSerializableOnCitus", err)
	}
	if ran || e.count(serial, "SELECT count(*) FROM idempotency_keys") != 0 {
		t.Fatal("a refused request ran its business or wrote a key")
	}
}

// TestCitusAutovacuumThresholds: the table's autovacuum settings reach every shard. On a
// distributed table made without them (before #28), Migrate through a worker succeeds
// without them (a worker refuses DDL on a distributed table), and Migrate through the
// coordinator sets them on every shard.
func TestCitusAutovacuumThresholds(t *testing.T) {
	e := newCitusEnv(t)
	ctx := context.Background()
	coordinator := e.pool(e.cluster.Coordinator, nil)
	const shardsWith = `SELECT count(*) FROM run_command_on_shards('idempotency_keys',
  $$SELECT 'autovacuum_vacuum_threshold=50000' = ANY (reloptions) FROM pg_class WHERE oid = '%s'::regclass$$)
WHERE success AND result = 't'`
	shards := e.count(coordinator, `SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'idempotency_keys'::regclass`)
	if got := e.count(coordinator, shardsWith); got != shards {
		t.Fatalf("%d of %d shards have the autovacuum threshold", got, shards)
	}
	if _, err := coordinator.Exec(ctx, `ALTER TABLE idempotency_keys RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold)`); err != nil {
		t.Fatal(err)
	}
	if got := e.count(coordinator, shardsWith); got != 0 {
		t.Fatalf("%d shards kept the threshold after RESET", got)
	}
	for _, w := range e.cluster.Workers {
		if err := Migrate(ctx, e.pool(w, nil)); err != nil {
			t.Fatalf("Migrate through a worker, table without its autovacuum settings: %v", err)
		}
	}
	if err := Migrate(ctx, coordinator); err != nil {
		t.Fatal(err)
	}
	if got := e.count(coordinator, shardsWith); got != shards {
		t.Fatalf("after Migrate through the coordinator, %d of %d shards have the autovacuum threshold", got, shards)
	}
}
