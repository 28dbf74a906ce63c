// Package devdb gives the example's demo and development server a database with nothing
// set up: DATABASE_URL when it is set, otherwise a throwaway PostgreSQL cluster started
// from the local binaries (idemgen's internal/pgembed) and deleted by the returned stop
// function; and the same for Redis (REDIS_ADDR, or a throwaway redis-server).
//
// It exists for the one-command demo only. A real service connects to its own database
// (service.Open takes a URL) and cannot import idemgen's internal packages.
package devdb

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/idemgen/idemgen/idem/idemredis/redistest"
	"github.com/idemgen/idemgen/internal/pgembed"
)

// URL returns DATABASE_URL, or starts a throwaway cluster and returns its URL. stop stops
// that cluster and deletes its files (a no-op for DATABASE_URL). logf receives progress
// lines.
func URL(ctx context.Context, logf func(format string, args ...any)) (url string, stop func() error, err error) {
	if url := os.Getenv("DATABASE_URL"); url != "" {
		return url, func() error { return nil }, nil
	}
	logf("DATABASE_URL is empty: starting an embedded throwaway PostgreSQL (deleted on exit)")
	c, err := pgembed.Start(ctx, pgembed.Options{Logf: logf})
	if err != nil {
		return "", nil, fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	logf("embedded PostgreSQL ready at %s", c.URL())
	return c.URL(), c.Stop, nil
}

// ErrNoRedisServer is RedisAddr's error when REDIS_ADDR is empty and no redis-server is
// installed (none on PATH, REDIS_SERVER unset): a short line saying how to get one.
var ErrNoRedisServer = errors.New("no redis-server (apt-get install redis-server, or set REDIS_ADDR)")

// RedisAddr returns REDIS_ADDR, or starts a throwaway redis-server from the local binary
// (Debian's redis-server; no persistence) and returns its address. stop stops that
// server (a no-op for REDIS_ADDR). Without a redis-server its error is ErrNoRedisServer.
func RedisAddr(logf func(format string, args ...any)) (addr string, stop func(), err error) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr, func() {}, nil
	}
	if _, err := redistest.Binary(); err != nil {
		return "", nil, ErrNoRedisServer
	}
	logf("REDIS_ADDR is empty: starting a throwaway redis-server (no persistence, stopped on exit)")
	// With no persistence the server writes no file: the system's temporary directory is
	// its working directory, and a process killed with SIGKILL leaves nothing behind (the
	// server dies with it).
	srv, err := redistest.Launch(os.TempDir())
	if err != nil {
		return "", nil, err
	}
	logf("throwaway redis-server ready at %s", srv.Addr())
	return srv.Addr(), srv.Kill, nil
}
