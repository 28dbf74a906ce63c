package idem

import (
	"context"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultTCPUserTimeout is the TCP user timeout [ConfigureConnections] is usually given: how
// long data sent to the database may stay unacknowledged before the connection is
// declared dead.
const DefaultTCPUserTimeout = 10 * time.Second

// ConfigureConnections makes the pool's connections notice a dead network (a partition, a
// blackholed route, a database host gone without a RST) within about userTimeout, instead
// of the operating system's defaults (hours): TCP keepalive probes after userTimeout/2 of
// silence, every userTimeout/6, three of them; and, on Linux, TCP_USER_TIMEOUT =
// userTimeout (data unacknowledged that long fails the connection). idem's own deadlines
// ([WithFlightTimeout], [WithAcquireTimeout]) bound each request either way; these bound
// what the business's statements and the pool's idle connections wait on. The database
// side has its own settings for the same (tcp_keepalives_idle, tcp_user_timeout: set them
// with ALTER ROLE or in postgresql.conf, not as startup parameters, which PgBouncer
// refuses). It replaces cfg.ConnConfig.DialFunc; userTimeout ≤ 0 means
// [DefaultTCPUserTimeout].
//
// It also wraps cfg.BeforeClose (the earlier hook still runs first) so that a connection
// pgx has already given up (a statement's context ended on a dead or frozen link) has its
// socket closed as soon as the pool destroys it, after a cancel request bounded by 1 s:
// pgx's close path would otherwise read the socket until the server closes it, for up to
// 15 s, and the pool holds the connection's slot until then. Connections idem itself gives up are closed at once either way.
func ConfigureConnections(cfg *pgxpool.Config, userTimeout time.Duration) {
	if userTimeout <= 0 {
		userTimeout = DefaultTCPUserTimeout
	}
	d := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     max(time.Second, userTimeout/2),
			Interval: max(time.Second, userTimeout/6),
			Count:    3,
		},
		Control: userTimeoutControl(userTimeout),
	}
	if cfg.ConnConfig.ConnectTimeout > 0 {
		d.Timeout = cfg.ConnConfig.ConnectTimeout
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	before := cfg.BeforeClose
	cfg.BeforeClose = func(conn *pgx.Conn) {
		if before != nil {
			before(conn)
		}
		if conn.IsClosed() {
			closeGivenUp(conn.PgConn(), time.Second)
		}
	}
}

// closeGivenUp closes the socket of a connection pgx has given up, after a cancel request
// of its own bounded by wait: behind PgBouncer the cancel reaches the server only while
// the client connection is open (PgBouncer finds the server by the client that asks), and
// a statement still running there (waiting on a lock, say) would otherwise keep its
// transaction, and the key's claim, until it ends. pgx's close path sends a cancel request
// too, but closing the socket first would race it.
func closeGivenUp(pc *pgconn.PgConn, wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	_ = pc.CancelRequest(ctx)
	cancel()
	_ = pc.Conn().Close()
}
