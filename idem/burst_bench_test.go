package idem

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkBurst releases 50 requests together, -benchtime times per case: 50 distinct
// keys (50 executions), 50 duplicates of one key answered at once (one execution, the
// others 409 or replays), and 50 duplicates with Policy.Wait (one execution, the others
// wait for it and replay). The business holds its transaction 5ms (a downstream call), so
// that duplicates meet a running owner. It reports the p50 and p99 of all requests and
// the database connections busy at the peak, per case. On the test cluster (fsync off):
// this is the protocol's cost, not the disk's.
//
//	go test ./idem -run '^$' -bench Burst -benchtime 20x
func BenchmarkBurst(b *testing.B) {
	const n = 50
	for _, c := range []struct {
		name string
		dup  bool
		wait time.Duration
	}{{"distinct", false, 0}, {"duplicates", true, 0}, {"duplicates+wait", true, 2 * time.Second}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			p := policy("createThing")
			p.Wait = c.wait
			slow := func(ctx context.Context, tx Tx) (*Response, error) {
				r, err := insertOne("x")(ctx, tx)
				time.Sleep(5 * time.Millisecond)
				return r, err
			}
			var lat []time.Duration
			var mu sync.Mutex
			outcomes := map[Outcome]int{}
			peak := int32(0)
			for round := range b.N {
				keys := make([]string, n)
				for i := range keys {
					keys[i] = fmt.Sprintf("r%d-%d", round, i)
					if c.dup {
						keys[i] = fmt.Sprintf("r%d", round)
					}
				}
				release(n, func(i int) {
					start := time.Now()
					r, err := e.store.Do(context.Background(), p, &keys[i], parts("x"), slow)
					d := time.Since(start)
					if busy := e.pool.Stat().AcquiredConns(); busy > peak {
						peak = busy // racy maximum: a gauge
					}
					mu.Lock()
					defer mu.Unlock()
					lat = append(lat, d)
					if err != nil {
						b.Error(err)
						return
					}
					outcomes[r.Outcome]++
				})
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(peak), "peak-conns")
			b.Logf("%s: %v", c.name, outcomes)
		})
	}
}
