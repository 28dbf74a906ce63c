// Package citustest gives tests a database of their own on a Citus cluster: the cluster is
// named by IDEM_CITUS_URL, the URL of its coordinator (as `../shared/tools/citus-cluster.sh
// start` prints it), with its workers added there. Without IDEM_CITUS_URL the tests skip
// and say why, CI included: no Citus is installed on CI's machines.
//
// Each database is created on every node (CREATE DATABASE propagated from the coordinator),
// gets the citus extension on every node and the cluster's nodes in its own metadata, and
// is dropped on every node when the test ends.
package citustest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the environment variable that names the coordinator of a Citus cluster.
const EnvURL = "IDEM_CITUS_URL"

// Cluster is one test's database on the cluster: URLs of the same database on the
// coordinator and on each worker (a service may point its pool at any of them).
type Cluster struct {
	Coordinator string
	Workers     []string
}

// NewDB creates a database of its own for t on the cluster IDEM_CITUS_URL names, or skips
// t when the variable is empty. It fails t when the cluster cannot be reached or has no
// worker.
func NewDB(t testing.TB) Cluster {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Skipf("%s is not set: no Citus cluster to run on (start one with ../shared/tools/citus-cluster.sh and set %s to the URL it prints)", EnvURL, EnvURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := connect(t, ctx, base)
	defer admin.Close(context.Background())
	type node struct {
		host string
		port int
	}
	var coordinator node
	if err := admin.QueryRow(ctx, `SELECT nodename, nodeport FROM pg_dist_node WHERE groupid = 0 AND noderole = 'primary'`).
		Scan(&coordinator.host, &coordinator.port); err != nil {
		t.Fatalf("citustest: the coordinator at %s has no entry for itself in pg_dist_node (citus_set_coordinator_host): %v", redact(base), err)
	}
	rows, err := admin.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive ORDER BY nodeid`)
	if err != nil {
		t.Fatalf("citustest: list workers: %v", err)
	}
	var workers []node
	for rows.Next() {
		var n node
		if err := rows.Scan(&n.host, &n.port); err != nil {
			t.Fatal(err)
		}
		workers = append(workers, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(workers) == 0 {
		t.Fatalf("citustest: the cluster at %s has no active worker", redact(base))
	}

	name := "idem_citus_" + randomHex(6)
	exec(t, ctx, admin, "SET citus.enable_create_database_propagation TO on")
	exec(t, ctx, admin, "CREATE DATABASE "+name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("citustest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		for _, q := range []string{"SET citus.enable_create_database_propagation TO on", "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Logf("citustest: drop %s: %v", name, err)
				return
			}
		}
	})

	at := func(n node) string { return withDatabase(t, base, n.host, n.port, name) }
	cl := Cluster{Coordinator: at(coordinator)}
	for _, w := range workers {
		cl.Workers = append(cl.Workers, at(w))
		c := connect(t, ctx, at(w))
		exec(t, ctx, c, "CREATE EXTENSION IF NOT EXISTS citus")
		c.Close(ctx)
	}
	c := connect(t, ctx, cl.Coordinator)
	defer c.Close(ctx)
	exec(t, ctx, c, "CREATE EXTENSION IF NOT EXISTS citus")
	exec(t, ctx, c, "SELECT citus_set_coordinator_host($1, $2)", coordinator.host, coordinator.port)
	for _, w := range workers {
		exec(t, ctx, c, "SELECT citus_add_node($1, $2)", w.host, w.port)
	}
	return cl
}

func connect(t testing.TB, ctx context.Context, u string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatalf("citustest: %s: %v", EnvURL, err)
	}
	cfg.RuntimeParams["client_min_messages"] = "warning"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("citustest: connect to %s: %v", redact(u), err)
	}
	return c
}

func exec(t testing.TB, ctx context.Context, c *pgx.Conn, q string, args ...any) {
	t.Helper()
	if _, err := c.Exec(ctx, q, args...); err != nil {
		t.Fatalf("citustest: %s: %v", q, err)
	}
}

// withDatabase is base with host, port and database replaced.
func withDatabase(t testing.TB, base, host string, port int, db string) string {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("citustest: %s is not a URL: %v", EnvURL, err)
	}
	u.Host = host + ":" + strconv.Itoa(port)
	u.Path = "/" + db
	return u.String()
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
