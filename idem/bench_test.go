package idem

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkBusinessTx measures one business transaction (insert one row, commit) with and
// without the protocol, at 1 and 16 goroutines. Compare with benchstat; the ratio
// protocol/plain is the cost of idempotency (claim, lock, complete: three more statements).
func BenchmarkBusinessTx(b *testing.B) {
	for _, par := range []int{1, 16} {
		e := newEnv(b)
		p := policy("createThing")
		var seq atomic.Int64
		b.Run(fmt.Sprintf("plain/goroutines=%d", par), func(b *testing.B) {
			runParallel(b, par, func() {
				tx, err := e.pool.Begin(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := insertOne("x")(context.Background(), tx); err != nil {
					b.Error(err)
					return
				}
				if err := tx.Commit(context.Background()); err != nil {
					b.Error(err)
					return
				}
			})
		})
		b.Run(fmt.Sprintf("idempotent/goroutines=%d", par), func(b *testing.B) {
			runParallel(b, par, func() {
				key := fmt.Sprintf("bench-%d", seq.Add(1))
				r, err := e.store.Do(context.Background(), p, &key, parts("x"), insertOne("x"))
				if err != nil || r.Outcome != OutcomeCompleted {
					b.Error(r, err)
					return
				}
			})
		})
	}
}

// runParallel runs f b.N times in total on exactly par goroutines.
func runParallel(b *testing.B, par int, f func()) {
	var next atomic.Int64
	done := make(chan struct{})
	for range par {
		go func() {
			defer func() { done <- struct{}{} }()
			for next.Add(1) <= int64(b.N) {
				f()
			}
		}()
	}
	for range par {
		<-done
	}
}
