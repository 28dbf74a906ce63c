package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// raise40001 fails the statement (and so the transaction) with a serialization failure.
const raise40001 = `DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'conflict'; END $$`

// When every retry of the business transaction hits a serialization failure, the call fails
// and the claim is released: a retry runs at once instead of waiting out the lease.
func TestSerializationRetriesExhaustedReleases(t *testing.T) {
	for _, retries := range []int{0, 2} {
		e := newEnv(t, WithMaxRetries(retries))
		p := policy("createThing")
		var calls atomic.Int64
		always := func(ctx context.Context, tx Tx) (*Response, error) {
			calls.Add(1)
			if _, err := insertOne("x")(ctx, tx); err != nil {
				return nil, err
			}
			_, err := tx.Exec(ctx, raise40001)
			return nil, err
		}
		_, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), always)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "40001" {
			t.Fatalf("retries %d: err = %v, want the serialization failure", retries, err)
		}
		if calls.Load() != int64(retries+1) || e.count(OutcomeRetried) != retries {
			t.Fatalf("retries %d: business ran %d times, retried %d", retries, calls.Load(), e.count(OutcomeRetried))
		}
		if e.rows("") != 0 || e.keyRows() != 0 || e.count(OutcomeFailed) != 1 {
			t.Fatalf("retries %d: %d business rows, %d keys, failed %d; want 0, 0, 1",
				retries, e.rows(""), e.keyRows(), e.count(OutcomeFailed))
		}
		if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
			t.Fatalf("retries %d: retry after the failure: %s, want completed", retries, r.Outcome)
		}
	}
}

// A panicking business function rolls back and releases the claim (the process lives on:
// net/http recovers the panic), then the panic continues up the stack.
func TestBusinessPanicReleases(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	boom := func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := insertOne("x")(ctx, tx); err != nil {
			return nil, err
		}
		panic("boom")
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the business panic", r)
			}
		}()
		_, _ = e.store.Do(context.Background(), p, ptr("k"), parts("x"), boom)
	}()
	if e.rows("") != 0 || e.keyRows() != 0 || e.int("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") != 0 {
		t.Fatalf("after a panic: %d business rows, %d keys, %d claims held; want 0, 0, 0", e.rows(""), e.keyRows(),
			e.int("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"))
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeCompleted {
		t.Fatalf("retry: %s, want completed", r.Outcome)
	}
}

// A business function that returns neither a response nor an error is a business error
// (rolled back, released), keyed or not; it does not panic the protocol.
func TestBusinessNilResponse(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	nothing := func(ctx context.Context, tx Tx) (*Response, error) {
		_, err := insertOne("x")(ctx, tx)
		return nil, err
	}
	if r, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), nothing); err == nil {
		t.Fatalf("keyed: %+v, want an error", r)
	}
	optional := policy("createThing")
	optional.KeyRequired = false
	if r, err := e.store.Do(context.Background(), optional, nil, parts("x"), nothing); err == nil {
		t.Fatalf("unkeyed: %+v, want an error", r)
	}
	if e.rows("") != 0 || e.keyRows() != 0 {
		t.Fatalf("%d business rows, %d keys; want 0, 0", e.rows(""), e.keyRows())
	}
}

// commitFault is a connection that, when armed, loses the link at the transaction's
// COMMIT: mode 1 drops the COMMIT unsent (the server rolls back when it sees the link go),
// mode 2 sends it and loses the answer (the server commits: the connection reads the
// server's answer, so the COMMIT has run, then fails and closes). Either way the client
// gets no answer.
type commitFault struct {
	net.Conn
	mode    *atomic.Int32
	swallow atomic.Bool // mode 2 fired: the next read loses the answer
}

func (c *commitFault) Write(b []byte) (int, error) {
	if m := c.mode.Load(); m != 0 && executesCommit(b) && c.mode.CompareAndSwap(m, 0) {
		if m == 2 {
			c.swallow.Store(true)
			return c.Conn.Write(b)
		}
		_ = c.Conn.Close()
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *commitFault) Read(b []byte) (int, error) {
	if c.swallow.Load() {
		_, _ = c.Conn.Read(b) // the server's answer: the COMMIT ran
		_ = c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return c.Conn.Read(b)
}

// preparedCommit is the name of the prepared statement pgx makes of "commit" (Conn.Prepare
// by SQL: "stmt_" and a digest), executeMsg the start of an Execute message.
var (
	preparedCommit = func() []byte {
		d := sha256.Sum256([]byte("commit"))
		return []byte("stmt_" + hex.EncodeToString(d[:24]))
	}()
	executeMsg = []byte("E\x00\x00\x00\x09\x00")
)

// executesCommit reports whether the client's write b runs a COMMIT: an Execute of the
// unnamed statement "commit" or of pgx's prepared one (preparing it runs nothing).
func executesCommit(b []byte) bool {
	return bytes.Contains(b, executeMsg) && (bytes.Contains(b, []byte("commit\x00")) || bytes.Contains(b, preparedCommit))
}

// faultyStore replaces e.store by a store whose connections lose the link at COMMIT when
// mode is set.
func (e *env) faultyStore(t *testing.T, mode *atomic.Int32) {
	cfg := e.pool.Config()
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &commitFault{Conn: conn, mode: mode}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.store = NewStore(pool, e.observer())
}

// The client going away after the business function returned does not undo it: the
// completion and COMMIT run under a context the request's cancellation cannot reach.
func TestClientCancelAfterBusinessCommits(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	thenGone := func(ctx context.Context, tx Tx) (*Response, error) {
		r, err := insertOne("x")(ctx, tx)
		cancel()
		return r, err
	}
	r, err := e.store.Do(ctx, p, ptr("k"), parts("x"), thenGone)
	if err != nil || r.Outcome != OutcomeCompleted {
		t.Fatalf("%+v, %v; want completed", r, err)
	}
	if r := e.do(p, "k", "x", insertOne("x")); r.Outcome != OutcomeReplayed || e.rows("") != 1 {
		t.Fatalf("retry: %s with %d rows, want a replay and 1", r.Outcome, e.rows(""))
	}
}
