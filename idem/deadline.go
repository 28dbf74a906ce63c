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
// A connection whose net.Conn refuses deadlines (a tunnel's, say: SetDeadline fails) gets
// the deadline as a context instead, as before, which pgx's context watcher handles as
// configured (pgconn.CancelRequestContextWatcherHandler sends the server a cancel
// request).
type flightDeadline struct {
	conn   *pgx.Conn
	at     time.Time
	cancel context.CancelFunc // the context's, when the socket refused the deadline
}

// boundFlights sets conn's socket deadline to the store's flight timeout from now, and
// returns the context to run the flights under: ctx, or, when the socket refused the
// deadline, ctx bounded by it.
func (s *Store) boundFlights(ctx context.Context, conn *pgx.Conn) (context.Context, flightDeadline) {
	d := flightDeadline{conn: conn, at: time.Now().Add(s.flightTimeout)}
	if err := conn.PgConn().Conn().SetDeadline(d.at); err != nil {
		ctx, d.cancel = context.WithDeadline(ctx, d.at)
	}
	return ctx, d
}

// end lifts the deadline (see flightDeadline).
func (d flightDeadline) end() {
	if d.cancel != nil {
		d.cancel()
		return
	}
	if pc := d.conn.PgConn(); !pc.IsClosed() {
		_ = pc.Conn().SetDeadline(time.Time{})
	}
}

// errFlightTimeout is wrapped by the error of a flight that outlived the store's flight
// timeout. It wraps context.DeadlineExceeded, as a flight's error did when the deadline
// was its context's; pgconn.Timeout(err) holds as well.
var errFlightTimeout = fmt.Errorf("idem: the flight timeout passed (WithFlightTimeout): %w", context.DeadlineExceeded)

// err is a flight's error, marked with errFlightTimeout when the deadline caused it.
func (d flightDeadline) err(err error) error {
	if err == nil || !pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || time.Now().Before(d.at) {
		return err
	}
	return fmt.Errorf("%w: %w", errFlightTimeout, err)
}
