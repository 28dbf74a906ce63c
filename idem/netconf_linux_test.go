package idem

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// ConfigureConnections' dialer gives the pool's TCP connections TCP_USER_TIMEOUT and
// keepalive, and the pool still works.
func TestConfigureConnections(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	ConfigureConnections(cfg, 4*time.Second)
	dial := cfg.ConnConfig.DialFunc
	var userTimeout, keepalive int
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			raw, _ := tc.SyscallConn()
			_ = raw.Control(func(fd uintptr) {
				userTimeout, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
				keepalive, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
			})
		}
		return c, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cfg.ConnConfig.Host != "" && cfg.ConnConfig.Host[0] == '/' {
		t.Skip("the test database is on a Unix socket: no TCP options to check")
	}
	if userTimeout != 4000 || keepalive != 1 {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d; want 4000, 1", userTimeout, keepalive)
	}
}
