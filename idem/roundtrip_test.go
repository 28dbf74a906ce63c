package idem

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// wireCount counts what the client sends on a pool's connections, from pgproto3's message
// trace: statements (Execute and Query messages) and flights (round trips: a run of
// client messages, which the client then waits on; pipelining puts several statements,
// even several syncs, in one flight).
type wireCount struct {
	mu             sync.Mutex
	flights, stmts int
	lastFromClient bool
}

func (w *wireCount) Write(line []byte) (int, error) {
	sender, msg, _ := bytes.Cut(line, []byte("\t"))
	msg, _, _ = bytes.Cut(msg, []byte("\t"))
	w.mu.Lock()
	defer w.mu.Unlock()
	fromClient := string(sender) == "F"
	if fromClient && !w.lastFromClient {
		w.flights++
	}
	w.lastFromClient = fromClient
	if fromClient && (string(msg) == "Execute" || string(msg) == "Query") {
		w.stmts++
	}
	return len(line), nil
}

// take returns the counts since the last take and resets them.
func (w *wireCount) take() (flights, stmts int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	flights, stmts = w.flights, w.stmts
	w.flights, w.stmts = 0, 0
	return flights, stmts
}

// tracedPool is a pool on url whose connections report to a new wireCount. It never pings
// connections on acquire (a ping would count).
func tracedPool(t *testing.T, url string) (*pgxpool.Pool, *wireCount) {
	t.Helper()
	w := &wireCount{}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		c.PgConn().Frontend().Trace(w, pgproto3.TracerOptions{SuppressTimestamps: true})
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, w
}

// The protocol's cost on the wireCount, counted per request against a plain transaction that
// does the same business work (BEGIN; INSERT; COMMIT): a fresh request costs the bare
// round trips (BEGIN and the claim in the first flight; completion and COMMIT in the
// last) and three statements more (LockKey, GetKey, CompleteKey), a replay or a 409 two
// round trips. A change in these counts is a change in the
// protocol's cost: update the README's performance notes with it.
func TestRoundTripsPerRequest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	business, bw := tracedPool(t, e.url)

	bare := func() {
		tx, err := business.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := insertOne("x")(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	type count struct{ flights, stmts int }
	measure := func(f func()) count {
		// Warm up: statements are prepared on a connection's first use of them (a replay's
		// first call executes).
		f()
		f()
		bw.take()
		f()
		var c count
		c.flights, c.stmts = bw.take()
		return c
	}
	seq := 0
	fresh := func(s *Store, p *Policy) func() {
		return func() {
			seq++
			key := fmt.Sprintf("fresh-%d", seq)
			if r, err := s.Do(ctx, p, &key, parts("x"), insertOne("x")); err != nil || r.Outcome != OutcomeCompleted {
				t.Fatalf("fresh request: %+v, %v", r, err)
			}
		}
	}
	replay := func(s *Store, p *Policy) func() {
		return func() {
			if r, err := s.Do(ctx, p, ptr("replayed"), parts("x"), insertOne("x")); err != nil || r.Outcome == OutcomeInProgress {
				t.Fatalf("replay: %+v, %v", r, err)
			}
		}
	}
	readCommitted, repeatableRead, serializable := policy("createThing"), policy("createThing"), policy("createThing")
	repeatableRead.Isolation = pgx.RepeatableRead
	serializable.Isolation = pgx.Serializable
	pipelined := NewStore(business)

	// In every mode but pgx's default (behind PgBouncer's transaction pooling) the session
	// is not ours: each claim's flight sets the idle bound with SET LOCAL, one statement more.
	local := 0
	if business.Config().ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		local = 1
	}
	base := measure(bare)
	for _, c := range []struct {
		name string
		run  func()
		want count
	}{
		{"bare transaction", bare, count{3, 3}},
		// BEGIN, LockKey and GetKey (the row as committed once the lock was granted) · the
		// business INSERT · CompleteKey and COMMIT
		{"fresh", fresh(pipelined, readCommitted), count{3, 6 + local}},
		// BEGIN, LockKey and GetKey · ROLLBACK
		{"replay", replay(pipelined, readCommitted), count{2, 4 + local}},
		// BEGIN, LockKey and GetKey · ClaimKeyRow · the business INSERT · CompleteKeyOver and COMMIT
		{"fresh, repeatable read", fresh(pipelined, repeatableRead), count{4, 7 + local}},
		// BEGIN and LockKeyOnly · ClaimKeyRow · the business INSERT · CompleteKeyOver and COMMIT
		{"fresh, serializable", fresh(pipelined, serializable), count{4, 6 + local}},
	} {
		if got := measure(c.run); got != c.want {
			t.Errorf("%s: %d flights (%d statements); want %d (%d)",
				c.name, got.flights, got.stmts, c.want.flights, c.want.stmts)
		}
	}
	if got := measure(fresh(pipelined, readCommitted)); got.flights > base.flights || got.stmts > base.stmts+3+local {
		t.Errorf("a fresh request takes %d round trips (%d statements), a bare transaction %d (%d): want no round trip and at most 3 statements more",
			got.flights, got.stmts, base.flights, base.stmts)
	}
}

// batchTracer records the statements of the batches (flights) it sees.
type batchTracer struct {
	mu    sync.Mutex
	stmts []string
}

func (bt *batchTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (bt *batchTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (bt *batchTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (bt *batchTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	first, _, _ := strings.Cut(strings.TrimPrefix(d.SQL, "-- name: "), " ")
	bt.stmts = append(bt.stmts, fmt.Sprintf("%s %s err=%v", first, d.CommandTag, d.Err))
}
func (bt *batchTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A connection tracer that follows batches (as OpenTelemetry's does) sees the protocol's
// flights, statement by statement, with their command tags.
func TestFlightsAreTracedAsBatches(t *testing.T) {
	e := newEnv(t)
	cfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		t.Fatal(err)
	}
	bt := &batchTracer{}
	cfg.ConnConfig.Tracer = bt
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if r, err := NewStore(pool).Do(context.Background(), policy("createThing"), ptr("k"), parts("x"), insertOne("x")); err != nil || r.Outcome != OutcomeCompleted {
		t.Fatalf("%+v, %v", r, err)
	}
	// The connection's first flight sets the lease's idle bound on its session (in pgx's
	// default mode; in the others, in the transaction).
	want := "[set SET err=<nil> begin BEGIN err=<nil> LockKey SELECT 1 err=<nil> GetKey SELECT 0 err=<nil> CompleteKey INSERT 0 1 err=<nil> commit COMMIT err=<nil>]"
	if cfg.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		want = "[begin BEGIN err=<nil> set SET err=<nil> LockKey SELECT 1 err=<nil> GetKey SELECT 0 err=<nil> CompleteKey INSERT 0 1 err=<nil> commit COMMIT err=<nil>]"
	}
	if got := fmt.Sprint(bt.stmts); got != want {
		t.Fatalf("traced %s, want %s", got, want)
	}
}
