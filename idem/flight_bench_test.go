//go:build unix

package idem

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFlights measures the protocol's flights alone, on the test cluster: "fresh" is a
// request whose business sends no statement (the claim's flight, then the completion's
// flight with COMMIT), "replay" a completed key's replay (the claim's flight, then
// ROLLBACK), "wait" the wait's flight on a key nobody holds (BEGIN, lock_timeout, AwaitKey
// granted at once, ROLLBACK). Besides time, allocations and bytes, it reports this
// process's CPU time (user and system) per op, cpu-µs/op: the Go side of a flight, not the
// server's. Compare two builds with benchstat, their runs interleaved.
func BenchmarkFlights(b *testing.B) {
	e := newEnv(b)
	p := policy("createThing")
	respond := func(context.Context, Tx) (*Response, error) {
		return &Response{Status: http.StatusCreated, Body: []byte(`{"id":1}`)}, nil
	}
	var seq atomic.Int64
	if r := e.do(p, "replayed", "x", respond); r.Outcome != OutcomeCompleted {
		b.Fatalf("the replayed key's first call: %s", r.Outcome)
	}
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("fresh/goroutines=%d", par), func(b *testing.B) {
			withCPU(b, par, func() {
				key := fmt.Sprintf("flight-%d", seq.Add(1))
				if r, err := e.store.Do(context.Background(), p, &key, parts("x"), respond); err != nil || r.Outcome != OutcomeCompleted {
					b.Error(r, err)
				}
			})
		})
		b.Run(fmt.Sprintf("replay/goroutines=%d", par), func(b *testing.B) {
			withCPU(b, par, func() {
				if r, err := e.store.Do(context.Background(), p, ptr("replayed"), parts("x"), respond); err != nil || r.Outcome != OutcomeReplayed {
					b.Error(r, err)
				}
			})
		})
	}
	b.Run("wait/goroutines=1", func(b *testing.B) {
		fp, err := Fingerprint(p.Operation, parts("x")...)
		if err != nil {
			b.Fatal(err)
		}
		withCPU(b, 1, func() {
			key := fmt.Sprintf("wait-%d", seq.Add(1))
			c := &call{s: e.store, p: p, key: key, fp: fp, lockID: LockID("", key)}
			if !c.awaitInDatabase(context.Background(), time.Second) {
				b.Error("the wait's flight: the lock of a key nobody holds was not granted")
			}
		})
	})
}

// withCPU runs f b.N times on par goroutines (runParallel), reporting the process's CPU
// time per op as cpu-µs/op.
func withCPU(b *testing.B, par int, f func()) {
	b.ReportAllocs()
	before := processCPU(b)
	b.ResetTimer()
	runParallel(b, par, f)
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
