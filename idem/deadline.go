package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// flightDeadline bounds the protocol's flights on the business connection by the store's
// flight timeout ([WithFlightTimeout]) with the connection's socket deadline
// (net.Conn.SetDeadline), not with a context: a read or write past it fails, pgx closes
// the connection (it sends the server a cancel request and closes the socket), and the
// database rolls the transaction back, as when pgx's default context watcher
// (pgconn.DeadlineContextWatcherHandler, which also sets the socket's deadline) saw a
// flight's context expire. What it saves per flight is the context: a timer context (a
// runtime timer and its allocations) and pgx's watch of it (context.AfterFunc and a
// channel); a flight under a context that cannot be cancelled (the completion's) is not
// watched at all. The socket's deadline is one runtime timer per connection, re-armed.
//
// The deadline is lifted when the flight is over (end), so that it never reaches the
// business's statements or the connection's next user, except on a connection pgx has
// closed: pgx bounds its closing with a deadline of its own, which lifting would undo.
//
// A flight under a context that can end (the request's: the client went away, or its
// deadline passed) runs under that context without its cancellation, and idem watches it
// itself (context.AfterFunc, as pgx's watch does): when it ends, the socket's deadline is
// moved to now, so the flight fails at once and its error wraps the context's (err).
// pgx's own watch would run the pool's context watcher handler instead, and one that
// defers the cut (pgconn.CancelRequestContextWatcherHandler's DeadlineDelay) would move
// the socket's deadline past the flight timeout: the bound would no longer hold.
//
// A connection whose net.Conn refuses deadlines (a tunnel's, say: SetDeadline fails) gets
// the deadline as a context instead, as before, which pgx's context watcher handles as
// configured (pgconn.CancelRequestContextWatcherHandler sends the server a cancel
// request).
type flightDeadline struct {
	conn   *pgx.Conn
	at     time.Time
	cancel context.CancelFunc // the context's, when the socket refused the deadline

	// The watch of the flights' context, when it can end: stop unregisters it, and fired
	// is closed once it has cut the socket (end waits for it before lifting the deadline).
	ctx   context.Context
	stop  func() bool
	fired chan struct{}
}

// boundFlights sets conn's socket deadline to the store's flight timeout from now, and
// returns the context to run the flights under: ctx, or, when the socket refused the
// deadline, ctx bounded by it.
func (s *Store) boundFlights(ctx context.Context, conn *pgx.Conn) (context.Context, flightDeadline) {
	d := flightDeadline{conn: conn, at: time.Now().Add(s.flightTimeout)}
	if conn.PgConn().IsClosed() {
		return ctx, d // its flights fail at once; pgx's closing keeps its own deadline
	}
	nc := conn.PgConn().Conn()
	if err := nc.SetDeadline(d.at); err != nil {
		ctx, d.cancel = context.WithDeadline(ctx, d.at)
		return ctx, d
	}
	if ctx.Done() == nil {
		return ctx, d
	}
	d.ctx, d.fired = ctx, make(chan struct{})
	d.stop = context.AfterFunc(ctx, func() {
		_ = nc.SetDeadline(time.Now())
		close(d.fired)
	})
	return context.WithoutCancel(ctx), d
}

// end lifts the deadline (see flightDeadline).
func (d flightDeadline) end() {
	if d.cancel != nil {
		d.cancel()
		return
	}
	if d.stop != nil && !d.stop() {
		<-d.fired // the watch is cutting the socket: lift the deadline after it
	}
	if pc := d.conn.PgConn(); !pc.IsClosed() {
		_ = pc.Conn().SetDeadline(time.Time{})
	}
}

// errFlightTimeout is wrapped by the error of a flight that outlived the store's flight
// timeout. It wraps context.DeadlineExceeded, as a flight's error did when the deadline
// was its context's; pgconn.Timeout(err) holds as well.
var errFlightTimeout = fmt.Errorf("idem: the flight timeout passed (WithFlightTimeout): %w", context.DeadlineExceeded)

// err is a flight's error, marked with errFlightTimeout when the deadline caused it, and
// wrapping the flights' context's error when its end cut the socket.
func (d flightDeadline) err(err error) error {
	if err == nil || !pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if d.ctx != nil && d.ctx.Err() != nil && time.Now().Before(d.at) {
		return fmt.Errorf("idem: %w during a flight: %w", context.Cause(d.ctx), err)
	}
	if time.Now().Before(d.at) {
		return err
	}
	return fmt.Errorf("%w: %w", errFlightTimeout, err)
}
