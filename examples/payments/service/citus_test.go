package service_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
	"github.com/idemgen/idemgen/internal/citustest"
	"github.com/idemgen/idemgen/internal/hammer"
)

// The example on a Citus cluster (IDEM_CITUS_URL, see internal/citustest), distributed by
// db/citus.sql: the service enters through the coordinator and through a worker, under
// each isolation level and plan cache mode, and every request is single-shard with a
// one-phase commit. It skips without a cluster (CI has none).

// citusEnv is one test's database on the cluster, migrated through the coordinator and
// through a worker, and distributed by citus.sql.
type citusEnv struct {
	t       *testing.T
	cluster citustest.Cluster
	// admin is a pool on the coordinator whose commands are not counted.
	admin *pgxpool.Pool
	// prepares counts the PREPARE TRANSACTION (two-phase commits) that the entry nodes
	// issued for the services' sessions (citus.log_remote_commands), and remote all the
	// commands they sent to other nodes (so the count is known to be live).
	prepares, remote atomic.Int64
}

func newCitusEnv(t *testing.T) *citusEnv {
	t.Helper()
	e := &citusEnv{t: t, cluster: citustest.NewDB(t)}
	ctx := context.Background()
	e.admin = e.pool(t, e.cluster.Coordinator, nil, false)
	if err := service.Setup(ctx, e.admin); err != nil {
		t.Fatal(err)
	}
	for range 2 { // re-runnable
		if err := db.Distribute(ctx, e.admin); err != nil {
			t.Fatal(err)
		}
	}
	var distributed int
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM citus_tables
		WHERE distribution_column = CASE table_name::text WHEN 'idempotency_keys' THEN 'scope' ELSE 'account_id' END
		  AND colocation_id = (SELECT colocation_id FROM citus_tables WHERE table_name = 'idempotency_keys'::regclass)`).Scan(&distributed); err != nil {
		t.Fatal(err)
	}
	if distributed != 4 {
		t.Fatalf("%d tables distributed by their tenant and co-located with idempotency_keys; want 4", distributed)
	}
	// A server whose pool points at a worker applies the schemas on start too.
	for _, w := range e.cluster.Workers {
		if err := service.Setup(ctx, e.pool(t, w, nil, false)); err != nil {
			t.Fatalf("service.Setup through a worker: %v", err)
		}
	}
	return e
}

// pool is a pool on the node at url, for t, with the session settings params; with
// count, its sessions log the commands their node sends to other nodes, counted in
// e.prepares when they prepare a transaction. Without, it is the test's own pool (setup,
// checks, the audit): its statements go in the simple protocol, so that Citus plans the
// multi-shard ones with their values.
func (e *citusEnv) pool(t testing.TB, url string, params map[string]string, count bool) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 12
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.ConnConfig.RuntimeParams["client_min_messages"] = "warning"
	if !count {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	} else {
		cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "on"
		cfg.ConnConfig.RuntimeParams["client_min_messages"] = "notice"
		cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			if strings.HasPrefix(n.Message, "issuing ") {
				e.remote.Add(1)
			}
			if strings.Contains(n.Message, "PREPARE TRANSACTION") {
				e.prepares.Add(1)
			}
		}
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// serve starts the service twice under the session settings params, once on a pool on the
// coordinator and once on a pool on the first worker, behind one URL that sends the
// requests to them in turn (a key's duplicates enter through both nodes). The stars' keys
// live in redis.
func (e *citusEnv) serve(t *testing.T, params map[string]string, redisStore service.Options) *env {
	t.Helper()
	var handlers []http.Handler
	for _, url := range []string{e.cluster.Coordinator, e.cluster.Workers[0]} {
		opts := redisStore
		opts.Logf = t.Logf
		handlers = append(handlers, service.New(e.pool(t, url, params, true), opts))
	}
	var next atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers[next.Add(1)%uint64(len(handlers))].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 100
	t.Cleanup(tr.CloseIdleConnections)
	return &env{t: t, srv: srv, pool: e.admin, client: &http.Client{Transport: tr}}
}

func (e *citusEnv) redis() service.Options {
	e.t.Helper()
	srv := redistest.Start(e.t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	e.t.Cleanup(func() { rdb.Close() })
	store, err := service.NewRedisStore(context.Background(), rdb, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return service.Options{Redis: store}
}

// citusSettings are the session settings the suite runs under (the isolation level a
// transaction gets when BEGIN names none, and the plan cache mode), with the hammer's
// size under each: 50 duplicates of one key, then keys × dups.
var citusSettings = []struct {
	name       string
	params     map[string]string
	keys, dups int
}{
	{"read-committed", map[string]string{}, 200, 5},
	{"repeatable-read", map[string]string{"default_transaction_isolation": "repeatable read"}, 200, 5},
	{"generic-plans", map[string]string{"plan_cache_mode": "force_generic_plan"}, 200, 5},
	{"repeatable-read+generic-plans", map[string]string{"default_transaction_isolation": "repeatable read", "plan_cache_mode": "force_generic_plan"}, 200, 5},
}

// TestCitusHammer runs the independent hammer against the example entering through the
// coordinator and a worker in turn, under each setting: 50 duplicates of one key, then
// 200 keys × 5, each key of its own account (so spread over the shards). Every invariant
// holds, no answer is a 5xx, one payment per key; then refunds (duplicates, a replay, a
// refusal) and stars. No request commits in two phases, and the audit is clean.
func TestCitusHammer(t *testing.T) {
	e := newCitusEnv(t)
	redisStore := e.redis()
	for _, set := range citusSettings {
		t.Run(set.name, func(t *testing.T) {
			s := e.serve(t, set.params, redisStore)
			before, remoteBefore := e.prepares.Load(), e.remote.Load()

			for _, run := range []struct{ keys, dups int }{{1, 50}, {set.keys, set.dups}} {
				res, err := hammer.Run(context.Background(), hammer.Config{
					URL:         s.srv.URL + "/payments",
					Header:      http.Header{service.AccountHeader: {"acct-{{i}}"}, "Content-Type": {"application/json"}},
					Body:        []byte(`{"amount":1999,"currency":"EUR","description":"order {{i}}"}`),
					Requests:    run.keys * run.dups,
					Keys:        run.keys,
					Concurrency: 50,
					KeyPrefix:   fmt.Sprintf("%s-%d-", set.name, run.keys),
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%d keys × %d: %d executions, statuses %v, %.0f requests/s", run.keys, run.dups, res.Executions, res.Status, res.RequestsPerSecond)
				if !res.OK() || res.ServerErrors != 0 || res.Executions != run.keys {
					t.Fatalf("%d keys × %d: %v", run.keys, run.dups, res.Problems())
				}
				if n := s.count(`SELECT count(*) FROM payments WHERE starts_with(idempotency_key, $1)`, res.KeyPrefix); n != run.keys {
					t.Fatalf("%d keys × %d: %d payments; want %d", run.keys, run.dups, n, run.keys)
				}
			}

			refundsAndStars(t, s, set.name)

			if got := e.prepares.Load() - before; got != 0 {
				t.Fatalf("%d PREPARE TRANSACTION during the requests; want 0 (every request single-shard, one phase)", got)
			}
			if e.remote.Load() == remoteBefore {
				t.Fatal("no remote command logged: the count of PREPARE TRANSACTION is blind (citus.log_remote_commands)")
			}
			if rep := s.audit(); !rep.OK() {
				t.Fatalf("audit:\n%s", rep)
			}
		})
	}
}

// refundsAndStars refunds and stars three payments of the hammer's accounts through s:
// concurrent duplicates refund once, a retry replays, a refund over what remains is
// refused (422), other accounts get 404s, and stars count.
func refundsAndStars(t *testing.T, s *env, setting string) {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT id, account_id FROM payments
		WHERE starts_with(idempotency_key, $1) ORDER BY account_id LIMIT 3`, setting+"-")
	if err != nil {
		t.Fatal(err)
	}
	type pay struct{ id, account string }
	var pays []pay
	for rows.Next() {
		var p pay
		if err := rows.Scan(&p.id, &p.account); err != nil {
			t.Fatal(err)
		}
		pays = append(pays, p)
	}
	if rows.Err() != nil || len(pays) != 3 {
		t.Fatalf("payments to refund: %v, %v", pays, rows.Err())
	}
	for i, p := range pays {
		refunds := "/payments/" + p.id + "/refunds"
		key := fmt.Sprintf("%s-refund-%d", setting, i)
		created := 0
		var first response
		for _, r := range s.concurrently(10, req{"POST", refunds, p.account, key, `{"amount":500}`}) {
			switch {
			case r.status == http.StatusCreated && !r.replayed():
				created++
				first = r
			case r.status == http.StatusCreated, r.status == http.StatusConflict:
			default:
				t.Fatalf("refund of %s: %s", p.id, r)
			}
		}
		if created != 1 {
			t.Fatalf("10 duplicates of refund %s: %d created; want 1", key, created)
		}
		if r := s.do(req{"POST", refunds, p.account, key, `{"amount":500}`}); r.status != http.StatusCreated || !r.replayed() || r.body != first.body {
			t.Fatalf("refund retry: %s; want %s replayed", r, first)
		}
		over := s.do(req{"POST", refunds, p.account, key + "-over", `{"amount":5000}`})
		wantProblem(t, "refund over the remaining amount", over, http.StatusUnprocessableEntity)
		if r := s.do(req{"POST", refunds, "acct-other", key, `{"amount":500}`}); r.status != http.StatusNotFound {
			t.Fatalf("refund from another account: %s; want 404", r)
		}
		if got := decode[paymentJSON](t, s.do(req{"GET", "/payments/" + p.id, p.account, "", ""}).body); got.Status != "partially_refunded" {
			t.Fatalf("payment %s after its refund: %+v", p.id, got)
		}

		star := "/payments/" + p.id + "/star"
		for n, k := range []string{key + "-star-1", key + "-star-1", key + "-star-2"} {
			r := s.do(req{"POST", star, p.account, k, ""})
			if r.status != http.StatusOK || r.replayed() != (n == 1) {
				t.Fatalf("star %d of %s: %s", n, p.id, r)
			}
		}
		if r := s.do(req{"POST", star, "acct-other", key + "-star-3", ""}); r.status != http.StatusNotFound {
			t.Fatalf("star from another account: %s; want 404", r)
		}
		if n := s.count(`SELECT stars FROM payment_stars WHERE account_id = $1 AND payment_id = $2`, p.account, p.id); n != 2 {
			t.Fatalf("%d stars of %s; want 2", n, p.id)
		}
	}
	if n := s.count(`SELECT count(*) FROM refunds WHERE starts_with(idempotency_key, $1)`, setting+"-refund-"); n != len(pays) {
		t.Fatalf("%d refunds; want %d", n, len(pays))
	}
}

// TestCitusAuditFindsOrphans: the audit reads every shard through the coordinator and
// through a worker, under generic plans, and finds a row without a key, a key without a
// row, a key with two rows and a row whose account is not its scope.
func TestCitusAuditFindsOrphans(t *testing.T) {
	e := newCitusEnv(t)
	generic := map[string]string{"plan_cache_mode": "force_generic_plan"}
	s := e.serve(t, generic, service.Options{})
	ctx := context.Background()
	for i := range 20 { // over several shards
		if r := s.do(req{"POST", "/payments", fmt.Sprintf("acct_%d", i), "k-audit", payment(700, "EUR")}); r.status != http.StatusCreated {
			t.Fatal(r)
		}
	}
	audit := func(want bool) []*service.AuditReport {
		var reps []*service.AuditReport
		for _, url := range []string{e.cluster.Coordinator, e.cluster.Workers[0]} {
			rep, err := service.Audit(ctx, e.pool(t, url, generic, false))
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() != want || rep.Payments.CreatedKeys != 21 && !want {
				t.Fatalf("audit through %s:\n%s", url, rep)
			}
			reps = append(reps, rep)
		}
		return reps
	}
	audit(true)
	for _, q := range []string{
		// a business row written outside the protocol (no key), and a second row for a key
		`INSERT INTO payments (account_id, amount, currency, idempotency_scope, idempotency_key) VALUES ('acct_3', 1, 'EUR', 'acct_3', 'k-sneaky')`,
		`INSERT INTO payments (account_id, amount, currency, idempotency_scope, idempotency_key) VALUES ('acct_5', 1, 'EUR', 'acct_5', 'k-audit')`,
	} {
		if _, err := e.admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// a completed key whose row is gone
	if r := s.do(req{"POST", "/payments", "acct_7", "k-lost", payment(800, "EUR")}); r.status != http.StatusCreated {
		t.Fatal(r)
	}
	if _, err := e.admin.Exec(ctx, `DELETE FROM payments WHERE account_id = 'acct_7' AND idempotency_key = 'k-lost'`); err != nil {
		t.Fatal(err)
	}
	for _, rep := range audit(false) {
		p := rep.Payments
		if p.KeysWithoutRow != 1 || p.RowsWithoutKey != 1 || p.KeysWithSeveralRows != 1 || p.CreatedKeys != 21 || p.Rows != 22 {
			t.Errorf("audit counts %+v", p)
		}
		want := map[string]string{"key without a row": "acct_7/k-lost", "row without a key": "acct_3/k-sneaky", "key with several rows": "acct_5/k-audit"}
		if len(rep.Samples) != len(want) {
			t.Errorf("samples %+v", rep.Samples)
		}
		for _, s := range rep.Samples {
			if want[s.Problem] != s.Scope+"/"+s.Key || s.Operation != "createPayment" {
				t.Errorf("sample %+v", s)
			}
		}
	}
}

// TestCitusQueriesSingleShard plans every statement of db/queries.sql that a request runs
// (all but the audit's), through the coordinator and through a worker, with values and
// with a generic plan, and wants each to be one task: routed to the account's shard.
// StarPayment is planned with values only: it runs in the simple protocol (star.go).
func TestCitusQueriesSingleShard(t *testing.T) {
	e := newCitusEnv(t)
	src, err := os.ReadFile("../db/queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{
		"account_id": "'acct_1'", "scope": "'acct_1'", "idempotency_scope": "'acct_1'",
		"id": "'pay_1'", "payment_id": "'pay_1'", "amount": "1", "currency": "'EUR'",
		"description": "NULL", "idempotency_key": "'k'", "key_prefix": "'k'",
	}
	arg := regexp.MustCompile(`sqlc\.n?arg\((\w+)\)`)
	queries := regexp.MustCompile(`(?s)-- name: (\w+) :\w+\n(.*?);\n`).FindAllStringSubmatch(string(src), -1)
	planned := 0
	for _, q := range queries {
		name, sql := q[1], q[2]
		if strings.HasPrefix(name, "Audit") {
			continue // reads every shard, by design
		}
		var lines []string
		for _, l := range strings.Split(sql, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		sql = strings.Join(lines, "\n")
		var params, args []string
		generic := arg.ReplaceAllStringFunc(sql, func(m string) string {
			a := arg.FindStringSubmatch(m)[1]
			if i := slices.Index(params, a); i >= 0 {
				return fmt.Sprintf("$%d", i+1)
			}
			params = append(params, a)
			args = append(args, values[a])
			return fmt.Sprintf("$%d", len(params))
		})
		custom := arg.ReplaceAllStringFunc(sql, func(m string) string {
			v, ok := values[arg.FindStringSubmatch(m)[1]]
			if !ok {
				t.Fatalf("%s: no value for %s", name, m)
			}
			return v
		})
		for node, url := range []string{e.cluster.Coordinator, e.cluster.Workers[0]} {
			conn, err := e.pool(t, url, nil, false).Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			plans := map[string]string{"values": explain(t, conn, "EXPLAIN "+custom)}
			if name != "StarPayment" {
				for _, q := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE q AS " + generic} {
					if _, err := conn.Exec(context.Background(), q); err != nil {
						t.Fatalf("%s: %s: %v", name, q, err)
					}
				}
				plans["generic"] = explain(t, conn, "EXPLAIN EXECUTE q("+strings.Join(args, ", ")+")")
			}
			conn.Release()
			for mode, plan := range plans {
				if !strings.Contains(plan, "Task Count: 1\n") {
					t.Errorf("%s through node %d, planned with %s: not one task:\n%s", name, node, mode, plan)
				}
			}
		}
		planned++
	}
	if planned < 7 {
		t.Fatalf("planned %d statements of queries.sql; want every request's (7 or more)", planned)
	}
}

func explain(t *testing.T, conn *pgxpool.Conn, q string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestCitusDistributeRefusesAnotherLayout: citus.sql leaves the tables it distributed as
// they are (newCitusEnv runs it twice), and refuses one distributed by another column,
// naming the statement that redistributes it.
func TestCitusDistributeRefusesAnotherLayout(t *testing.T) {
	e := newCitusEnv(t)
	ctx := context.Background()
	if _, err := e.admin.Exec(ctx, `SELECT alter_distributed_table('payment_stars', distribution_column => 'payment_id')`); err != nil {
		t.Fatal(err)
	}
	err := db.Distribute(ctx, e.admin)
	if err == nil || !strings.Contains(err.Error(), "payment_stars is distributed by payment_id, not by account_id co-located with idempotency_keys") {
		t.Fatalf("citus.sql on payment_stars distributed by payment_id: %v; want a refusal", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.Contains(pgErr.Hint, "alter_distributed_table('payment_stars', distribution_column => 'account_id', colocate_with => 'idempotency_keys')") {
		t.Fatalf("refusal %#v: want a hint with the statement that redistributes it", pgErr)
	}
}
