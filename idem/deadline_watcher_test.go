package idem

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A pool whose connections answer a cancelled context with a cancel request
// (pgconn.CancelRequestContextWatcherHandler, as services behind PgBouncer or with
// slow networks configure pgx) sets the socket's deadline to the handler's DeadlineDelay
// from the cancel: a client gone during a stalled claim flight moves the flight's
// deadline (the flight timeout) later, and the call runs past the flight timeout by up to
// DeadlineDelay. The flight timeout is the bound WithFlightTimeout promises, whatever the
// request's context.
func TestClaimFlightDeadlineWithCancelRequestWatcher(t *testing.T) {
	const delay = 6 * time.Second // the handler's CancelRequestDelay and DeadlineDelay
	e := newOneConnEnvWith(t, flightTimeout, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, CancelRequestDelay: delay, DeadlineDelay: delay}
		}
	})
	p := policy("createThing")

	// Without a cancel the socket deadline bounds the stalled flight.
	release := e.holdLock(t, "LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
	start := time.Now()
	_, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x"))
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > flightBound {
		t.Fatalf("stalled claim flight: %v after %v; want the flight timeout %v", err, took, flightTimeout)
	}
	release()
	e.cutFlightGone()

	// The client goes away during the stalled flight.
	release = e.holdLock(t, "LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start = time.Now()
	go func() {
		_, err := e.store.Do(ctx, p, ptr("k"), parts("x"), insertOne("x"))
		done <- err
	}()
	e.waitForLockWait("pg_try_advisory_xact_lock")
	cancel()
	err = <-done
	if took := time.Since(start); took > flightBound {
		t.Fatalf("stalled claim flight, client gone: returned after %v (%v); want within the flight timeout %v (bound %v): "+
			"the cancelled context's watcher moved the socket deadline %v past the cancel", took, err, flightTimeout, flightBound, delay)
	}
}
