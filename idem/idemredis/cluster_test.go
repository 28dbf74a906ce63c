package idemredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
)

// On Redis Cluster (a one-node cluster holding every slot), through a ClusterClient: the
// start check reads every master, the scripts run (one key each, its hash tag the
// digest), and the key's record is in the slot of its hash tag.
func TestCluster(t *testing.T) {
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	ctx := context.Background()
	admin := clientFor(t, srv.Addr())
	if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := admin.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok: %q %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	seen := &counts{}
	store, err := New(ctx, rdb, WithObserver(seen.observe), WithScope(func(context.Context) (string, error) { return "tenant{1}", nil }))
	if err != nil {
		t.Fatal(err)
	}
	var runs int
	fn := func(context.Context) (*idem.Response, error) { runs++; return created(runs), nil }
	for range 2 {
		if _, err := store.Do(ctx, testPolicy, ptr("{k}ey"), body("p"), fn); err != nil {
			t.Fatal(err)
		}
	}
	if runs != 1 || seen.get(idem.OutcomeReplayed) != 1 {
		t.Errorf("%d runs, outcomes %s; want 1 run and a replay", runs, seen)
	}
	rk := redisKey(DefaultPrefix, "tenant{1}", "{k}ey")
	tag := rk[strings.IndexByte(rk, '{')+1 : len(rk)-1]
	slot, err := admin.ClusterKeySlot(ctx, rk).Result()
	if err != nil {
		t.Fatal(err)
	}
	if tagSlot, _ := admin.ClusterKeySlot(ctx, tag).Result(); slot != tagSlot {
		t.Errorf("the record's slot %d is not its hash tag's %d", slot, tagSlot)
	}
	if n, _ := admin.ClusterCountKeysInSlot(ctx, int(slot)).Result(); n != 1 {
		t.Errorf("%d keys in the record's slot, want 1", n)
	}
}
