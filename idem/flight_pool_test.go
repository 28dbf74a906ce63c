package idem

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// Pooled flights (newFlight, release) used by many goroutines at once, each on its own
// connection, with flights of different shapes (more steps than a flight holds inline,
// statements whose result formats differ, a failing statement and the statements it
// skips, arguments of several sizes): every step reads its own statement's values,
// never another flight's, and a released flight keeps no steps and no argument
// values. Run it with -race.
func TestPooledFlightsConcurrently(t *testing.T) {
	e := newEnv(t)
	const (
		goroutines = 8
		rounds     = 40
	)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			skipPreparedBehindPooler(t, mode)
			cfg, err := pgxpool.ParseConfig(e.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = goroutines
			cfg.ConnConfig.DefaultQueryExecMode = mode
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			w := wireOf(pool)
			var failures atomic.Int32
			fail := func(format string, args ...any) {
				if failures.Add(1) <= 5 {
					t.Errorf(format, args...)
				}
			}
			release(goroutines, func(g int) {
				ctx := context.Background()
				conn, err := pool.Acquire(ctx)
				if err != nil {
					fail("acquire: %v", err)
					return
				}
				defer conn.Release()
				for r := range rounds {
					runPooledFlightRound(ctx, conn.Conn(), w, g, r, fail)
				}
			})
		})
	}
}

// runPooledFlightRound runs one flight whose shape and values depend on (g, r) and checks
// every step's result, then that the released flight is empty.
func runPooledFlightRound(ctx context.Context, conn *pgx.Conn, w wire, g, r int, fail func(string, ...any)) {
	f := newFlight(conn, w)
	tag := fmt.Sprintf("g%d-r%d", g, r)
	if leftover := leftoverOf(f); leftover != "" {
		fail("%s: a flight from the pool keeps %s", tag, leftover)
	}
	body := make([]byte, (g*37+r*11)%700) // arguments of sizes around pgx's buffer caps
	for i := range body {
		body[i] = byte(g + i)
	}
	type check struct {
		s     *step
		b     *bool
		n     *int64
		text  *string
		bytes *[]byte
		want  int64
	}
	var checks []check
	steps := 3 + (g+r)%9 // up to 11 statements: past the 8 inline steps
	failAt := -1
	if r%5 == 4 {
		failAt = steps / 2 // a statement that fails, the rest of its group skipped
	}
	for i := range steps {
		want := int64(g*100000 + r*100 + i)
		switch {
		case i == failAt:
			checks = append(checks, check{s: f.query(idemdb.Statement{SQL: "select 1/($1::int - $1::int)", Args: []any{int32(i)}}), want: -1})
		case i%2 == 0:
			c := check{b: new(bool), n: new(int64), want: want}
			c.s = f.query(idemdb.Statement{SQL: "select $1::int > 0, $2::bigint", Args: []any{int32(1), want}}, c.b, c.n)
			checks = append(checks, c)
		default:
			c := check{text: new(string), bytes: new([]byte), want: want}
			c.s = f.query(idemdb.Statement{SQL: "select $1::text, $2::bytea", Args: []any{fmt.Sprintf("%s-%d", tag, want), body}}, c.text, c.bytes)
			checks = append(checks, c)
		}
	}
	if err := f.run(ctx); err != nil {
		fail("%s: run: %v", tag, err)
		f.release()
		return
	}
	for i, c := range checks {
		switch {
		case failAt >= 0 && i > failAt:
			if c.s.err == nil {
				fail("%s: step %d after the failed one: no error", tag, i)
			}
		case i == failAt:
			if pgError(c.s.err) == nil {
				fail("%s: step %d: %v, want the server's division by zero", tag, i, c.s.err)
			}
		case c.s.err != nil:
			fail("%s: step %d: %v", tag, i, c.s.err)
		case c.b != nil:
			if !*c.b || *c.n != c.want {
				fail("%s: step %d: %v %d, want true %d", tag, i, *c.b, *c.n, c.want)
			}
		default:
			if *c.text != fmt.Sprintf("%s-%d", tag, c.want) || string(*c.bytes) != string(body) {
				fail("%s: step %d: %q and %d bytes, want %q and %d bytes", tag, i, *c.text, len(*c.bytes), fmt.Sprintf("%s-%d", tag, c.want), len(body))
			}
		}
	}
	f.release()
}

// leftoverOf describes what of an earlier request a flight holds ("" when nothing).
func leftoverOf(f *flight) string {
	if len(f.queued) != 0 {
		return fmt.Sprintf("%d queued steps", len(f.queued))
	}
	for _, q := range f.queued[:cap(f.queued)] {
		if q != nil {
			return "a step in its queue's array"
		}
	}
	for i := range f.inline {
		s := &f.inline[i]
		if s.sql != "" || s.args != nil || s.dest != nil || s.sd != nil || s.err != nil || s.found || s.done {
			return fmt.Sprintf("inline step %d", i)
		}
		for _, d := range s.destBuf {
			if d != nil {
				return fmt.Sprintf("a scan target of inline step %d", i)
			}
		}
	}
	for _, v := range f.eqb.ParamValues[:cap(f.eqb.ParamValues)] {
		if v != nil {
			return "an argument value"
		}
	}
	if len(f.formats) != 0 {
		return "result formats"
	}
	return ""
}
