package idemredis_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemredis"
)

// likePolicy is what idemgen generates for an operation marked store: redis.
var likePolicy = idem.MustPolicy(idem.Policy{
	Operation: "likePost", KeySource: "header Idempotency-Key", KeyRequired: true,
	Lease: 5 * time.Second, Retention: time.Hour,
})

// A store on a Redis whose maxmemory-policy is noeviction, and one call of the protocol as
// the generated handler makes it: the business (here a stand-in) commits its own work,
// then the key completes; the same key again is a replay.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	store, err := idemredis.New(ctx, rdb, idemredis.WithScope(func(ctx context.Context) (string, error) {
		return "tenant-1", nil // the authenticated tenant, from ctx
	}))
	if err != nil {
		log.Fatal(err) // unreachable, or a maxmemory-policy that may evict keys
	}
	key := "like-42"
	like := func(ctx context.Context) (*idem.Response, error) {
		// UPDATE posts SET likes = likes + 1 ... (committed before returning)
		return &idem.Response{Status: http.StatusNoContent, Body: []byte{}}, nil
	}
	for range 2 {
		resp, err := store.Do(ctx, likePolicy, &key, []idem.Part{{Name: "path id", Value: "42"}}, like)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(resp.Status, resp.Outcome)
	}
}
