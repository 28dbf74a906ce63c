package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// A flight is several statements written to the server at once and their results read
// back: one round trip (pgconn's pipeline mode, extended protocol). Sync points split it
// into implicit transactions: a statement queued before a sync commits (or fails) on its
// own, whatever follows. After an error the server skips the rest of that statement's
// group up to the next sync; those statements report errSkipped.
//
// In pgx's default query exec mode (cache_statement) statements are prepared once per
// connection (pgx's Conn.Prepare, by their SQL) and sent bound to their prepared
// statement. In every other mode (exec, simple_protocol: behind PgBouncer's transaction
// pooling) they go as unnamed statements with text parameters, as pgx's exec mode sends
// them. A connection tracer that implements pgx.BatchTracer (OpenTelemetry's, for one)
// sees each flight as a batch.
//
// Flights are pooled (newFlight, release): a request's flights reuse the steps, the
// argument encoder and the result formats of earlier ones instead of allocating them per
// statement. A step is valid until its flight is released.
type flight struct {
	conn   *pgx.Conn
	wire   wire
	queued []*step
	inline [inlineSteps]step // the first steps' storage
	// eqb encodes each statement's arguments in turn (the frontend copies them into its
	// send buffer at once); formats holds every statement's result formats, which the
	// pipeline keeps until it reads that statement's result.
	eqb     pgx.ExtendedQueryBuilder
	formats []int16
}

// inlineSteps is the number of steps a flight holds without allocating: the claim's
// flight has at most 7.
const inlineSteps = 8

// maxDest is the number of scan targets a step holds without allocating (GetKey has 8).
const maxDest = 8

var flights = sync.Pool{New: func() any { return new(flight) }}

// wire is how flights talk to the connections of a pool, read once from its config.
type wire struct {
	prepare bool            // pgx's cache_statement mode: prepare statements
	tracer  pgx.BatchTracer // the connections' tracer, if it follows batches
}

func wireOf(pool *pgxpool.Pool) wire {
	cfg := pool.Config().ConnConfig
	tracer, _ := cfg.Tracer.(pgx.BatchTracer)
	return wire{prepare: cfg.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement, tracer: tracer}
}

// step is one queued statement (or sync point) and, once the flight is back, its result.
type step struct {
	sync bool
	sql  string
	args []any
	dest []any                        // scan targets of the first row, if any
	sd   *pgconn.StatementDescription // the prepared statement, if prepared
	// destBuf holds dest (a copy of query's: the caller's slice does not escape).
	destBuf [maxDest]any

	tag   pgconn.CommandTag
	rows  int64 // rows affected (or returned)
	found bool  // a row was returned (and scanned into dest)
	err   error
	done  bool // the server answered (or skipped) it
}

// errSkipped is the error of a statement the server skipped: an earlier statement of its
// group failed.
var errSkipped = errors.New("idem: skipped after an earlier error in its flight")

// newFlight returns an empty flight on conn, to be released when its steps have been read.
func newFlight(conn *pgx.Conn, w wire) *flight {
	f := flights.Get().(*flight)
	f.conn, f.wire = conn, w
	return f
}

// release returns f to the pool. Its steps are cleared first (they hold the request's
// arguments and scan targets), and so are the encoder's argument values (which may point
// to a response body).
func (f *flight) release() {
	f.inline = [inlineSteps]step{}
	clear(f.queued)
	f.queued = f.queued[:0]
	clear(f.eqb.ParamValues[:cap(f.eqb.ParamValues)])
	_ = f.eqb.Build(nil, nil, nil) // resets the encoder, and drops its buffers past pgx's caps
	f.formats = f.formats[:0]
	f.conn = nil
	flights.Put(f)
}

// newStep queues a step, in the inline storage while it lasts.
func (f *flight) newStep() *step {
	var s *step
	if n := len(f.queued); n < inlineSteps {
		s = &f.inline[n]
	} else {
		s = new(step)
	}
	f.queued = append(f.queued, s)
	return s
}

// query queues st; the first row it returns, if any, is scanned into dest.
func (f *flight) query(st idemdb.Statement, dest ...any) *step {
	s := f.newStep()
	s.sql, s.args = st.SQL, st.Args
	if len(dest) <= maxDest {
		s.dest = append(s.destBuf[:0], dest...)
	} else {
		s.dest = append([]any(nil), dest...)
	}
	return s
}

// exec queues a statement without parameters (BEGIN, COMMIT, ROLLBACK).
func (f *flight) exec(sql string) *step { return f.query(idemdb.Statement{SQL: sql}) }

// sync queues a sync point: the end of an implicit transaction (or of an error's reach).
func (f *flight) sync() { f.newStep().sync = true }

// run sends the flight and reads every result. The error is a transport or protocol
// failure (the connection is then closed); it is also the error of every step the server
// did not answer. Statement errors are in their steps.
func (f *flight) run(ctx context.Context) error {
	if n := len(f.queued); n == 0 || !f.queued[n-1].sync {
		f.sync()
	}
	tracer := f.wire.tracer
	if tracer != nil {
		ctx = f.traceStart(ctx, tracer)
	}
	var err error
	if f.wire.prepare {
		err = f.prepare(ctx)
	}
	if err == nil {
		err = f.send(ctx)
		f.forgetStalePlans(ctx)
	}
	if tracer != nil {
		f.traceEnd(ctx, tracer, err)
	}
	return err
}

// forgetStalePlans deallocates the flight's prepared statements on the connection when the
// server refused one of them because the tables it reads changed since it was prepared
// ("cached plan must not change result type", 0A000: a migration that changed a column's
// type). Prepared once for the connection's life, they would fail every later flight on
// it; so the request that met the change fails, and the next one prepares them again.
// The code is 0A000 (feature_not_supported; the message may be translated), so another
// refusal of that code costs only a prepare again. The deallocation is the protocol's
// Close message, which the server runs also in a failed transaction; an error of it is
// left to the connection's next use.
func (f *flight) forgetStalePlans(ctx context.Context) {
	stale := false
	for _, s := range f.queued {
		if e := pgError(s.err); e != nil && e.Code == "0A000" {
			stale = true
		}
	}
	if !stale {
		return
	}
	for _, s := range f.queued {
		if s.sd != nil {
			_ = f.conn.Deallocate(ctx, s.sql)
		}
	}
}

// prepare prepares the flight's statements on the connection (a no-op for those it has
// prepared before). On failure nothing of the flight was sent; every step gets the error.
func (f *flight) prepare(ctx context.Context) error {
	for _, s := range f.queued {
		if s.sync {
			continue
		}
		sd, err := f.conn.Prepare(ctx, s.sql, s.sql)
		if err != nil {
			for _, s := range f.queued {
				s.err = err
			}
			return err
		}
		s.sd = sd
	}
	return nil
}

// send writes the flight and reads its answers.
func (f *flight) send(ctx context.Context) error {
	pl := f.conn.PgConn().StartPipeline(ctx)
	for _, s := range f.queued {
		if s.sync {
			pl.SendPipelineSync()
			continue
		}
		eqb := &f.eqb
		if err := eqb.Build(f.conn.TypeMap(), s.sd, s.args); err != nil {
			pl.Close()
			return fmt.Errorf("idem: encode arguments: %w", err)
		}
		// The result formats in a region of their own: the pipeline keeps them until it
		// reads the statement's result, and the builder's are the next statement's (with
		// one shared slice, LockKey's booleans were read as GetKey's text).
		start := len(f.formats)
		f.formats = append(f.formats, eqb.ResultFormats...)
		formats := f.formats[start:len(f.formats):len(f.formats)]
		if s.sd != nil {
			pl.SendQueryStatement(s.sd, eqb.ParamValues, eqb.ParamFormats, formats)
		} else {
			pl.SendQueryParams(s.sql, eqb.ParamValues, nil, eqb.ParamFormats, formats)
		}
	}
	if err := pl.Flush(); err != nil {
		pl.Close()
		for _, s := range f.queued {
			s.err = err
		}
		return err
	}
	err := f.read(pl)
	if cerr := pl.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		for _, s := range f.queued {
			if !s.done {
				s.err = err
			}
		}
	}
	return err
}

// read fills in the steps' results in order. An error in place of a sync's answer (the
// implicit transaction failed to commit, e.g. a deferred constraint) becomes the error of
// every statement of that group.
func (f *flight) read(pl *pgconn.Pipeline) error {
	group := 0      // index of the current group's first step
	failed := false // an earlier statement of the current group failed
	for i, s := range f.queued {
		if !s.sync && failed {
			s.err, s.done = errSkipped, true
			continue
		}
		res, err := pl.GetResults()
		if s.sync && pgError(err) != nil {
			for _, g := range f.queued[group:i] {
				if g.err == nil {
					g.err = err
				}
			}
			res, err = pl.GetResults() // the sync's own answer follows
		}
		serverErr := pgError(err) != nil // the server answered with an error
		if err == nil || serverErr {
			s.done = true
		}
		switch {
		case serverErr && !s.sync:
			s.err, failed = err, true
		case err != nil:
			return err
		case s.sync:
			if _, ok := res.(*pgconn.PipelineSync); !ok {
				return fmt.Errorf("idem: flight out of step: got %T at a sync point", res)
			}
			group, failed = i+1, false
		default:
			rr, ok := res.(*pgconn.ResultReader)
			if !ok {
				return fmt.Errorf("idem: flight out of step: got %T for a statement", res)
			}
			s.scan(f.conn, rr)
			if s.err != nil {
				if pgError(s.err) == nil {
					return s.err
				}
				failed = true
			}
		}
	}
	return nil
}

// scan reads a statement's result: its first row into dest, its row count.
func (s *step) scan(conn *pgx.Conn, rr *pgconn.ResultReader) {
	if len(s.dest) == 0 {
		// Nothing to scan (BEGIN, COMMIT, a write): the command tag alone, without the
		// row reader's allocations.
		for rr.NextRow() {
			s.found = true
		}
		s.tag, s.err = rr.Close()
		s.rows = s.tag.RowsAffected()
		return
	}
	rows := pgx.RowsFromResultReader(conn.TypeMap(), rr)
	for rows.Next() {
		if !s.found {
			s.err = rows.Scan(s.dest...)
		}
		s.found = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		s.err = err
	}
	s.tag = rows.CommandTag()
	s.rows = s.tag.RowsAffected()
}

// traceStart reports the flight's statements to tracer as a batch.
func (f *flight) traceStart(ctx context.Context, tracer pgx.BatchTracer) context.Context {
	b := &pgx.Batch{}
	for _, s := range f.queued {
		if !s.sync {
			b.Queue(s.sql, s.args...)
		}
	}
	return tracer.TraceBatchStart(ctx, f.conn, pgx.TraceBatchStartData{Batch: b})
}

// traceEnd reports each statement's outcome, then the flight's.
func (f *flight) traceEnd(ctx context.Context, tracer pgx.BatchTracer, err error) {
	for _, s := range f.queued {
		if !s.sync {
			tracer.TraceBatchQuery(ctx, f.conn, pgx.TraceBatchQueryData{
				SQL: s.sql, Args: s.args, CommandTag: s.tag, Err: s.err})
		}
	}
	tracer.TraceBatchEnd(ctx, f.conn, pgx.TraceBatchEndData{Err: err})
}
