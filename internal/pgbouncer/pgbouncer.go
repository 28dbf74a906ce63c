// Package pgbouncer runs a throwaway PgBouncer in front of a PostgreSQL server, for tests
// that must prove the idempotency protocol works behind a transaction-pooling proxy.
//
// Start writes a config into a new temporary directory and starts Debian's pgbouncer
// binary as a child process listening only on 127.0.0.1 (no unix socket), in
// transaction pooling mode by default, with trust authentication for the user "postgres"
// and a wildcard database entry, so every database of the upstream server is reachable
// under its own name. As root, pgbouncer runs as the "postgres" OS user (it refuses root).
// The child gets the Linux parent-death signal, so it dies with the test process.
//
// # Clients behind transaction pooling
//
// In transaction mode consecutive transactions of one client may run on different
// server connections, so server-side prepared statements do not survive between them.
// Debian 12's PgBouncer (1.18) predates prepared-statement support
// (max_prepared_statements, 1.21). pgx's default query exec mode
// (QueryExecModeCacheStatement) prepares named statements and fails there ("prepared
// statement \"stmtcache_...\" does not exist"). Use a mode that prepares nothing:
// QueryExecModeExec (the unnamed statement, parse+bind+execute in one round trip) or
// QueryExecModeSimpleProtocol (client-side interpolation). Set it on the pool with
//
//	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
//
// or in the connection string with default_query_exec_mode=exec (what [Bouncer.URL] and
// [Bouncer.Via] add). In both modes pgx infers parameter types from Go types, so a jsonb
// column must be passed a JSON type (json.RawMessage, a string), not []byte, which goes
// as bytea. See RELIABILITY.md for the suites run behind this proxy.
package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgembed"
)

// InstallHelp explains how to get pgbouncer. It is part of the error Start returns when
// the binary is missing.
const InstallHelp = "pgbouncer not found on PATH or in /usr/sbin. Install it, e.g.:\n" +
	"  Debian/Ubuntu: apt-get install -y pgbouncer\n" +
	"  Fedora/RHEL:   dnf install pgbouncer\n" +
	"  macOS:         brew install pgbouncer"

// ErrNotInstalled is returned (wrapped) by Start when no pgbouncer binary is found.
var ErrNotInstalled = errors.New(InstallHelp)

// ExecMode is the pgx default_query_exec_mode that [Bouncer.URL] selects: no named
// prepared statements, so it works under transaction pooling.
const ExecMode = "exec"

// Options configure Start.
type Options struct {
	// UpstreamHost is the PostgreSQL server's host; "" means 127.0.0.1.
	UpstreamHost string
	// UpstreamPort is the PostgreSQL server's TCP port. Required.
	UpstreamPort int
	// PoolMode is "transaction" (default), "session" or "statement".
	PoolMode string
	// PoolSize is the number of server connections per database/user pair (default 20).
	PoolSize int
	// Settings are extra [pgbouncer] settings; they override the defaults.
	Settings map[string]string
	// Logf, if non-nil, receives progress messages.
	Logf func(format string, args ...any)
}

// Bouncer is a running pgbouncer.
type Bouncer struct {
	dir     string
	port    int
	logPath string

	mu     sync.Mutex
	proc   *os.Process
	exited chan struct{}
}

// Start starts pgbouncer in front of 127.0.0.1:opts.UpstreamPort on a free loopback port
// and waits until it passes a query through. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Bouncer, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	if opts.UpstreamPort == 0 {
		return nil, errors.New("pgbouncer: Options.UpstreamPort is required")
	}
	cred, err := pgembed.ServiceCredential() // pgbouncer refuses to run as root too
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(pgembed.TempRoot(cred), "pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	b := &Bouncer{dir: dir, logPath: filepath.Join(dir, "pgbouncer.log")}
	fail := func(err error) (*Bouncer, error) {
		b.Stop()
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(fmt.Errorf("pgbouncer: %w", err))
		}
	}
	for attempt := 1; ; attempt++ {
		port, err := pgembed.FreePort()
		if err != nil {
			return fail(err)
		}
		b.port = port
		if err := b.writeConfig(opts); err != nil {
			return fail(err)
		}
		err = b.start(ctx, bin, cred, opts)
		if err == nil {
			return b, nil
		}
		if attempt < 5 && strings.Contains(err.Error(), "Address already in use") {
			continue
		}
		return fail(err)
	}
}

// installPaths are where Find looks after PATH (Debian puts pgbouncer in /usr/sbin).
var installPaths = []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer"}

// Find returns the path of the pgbouncer binary (PATH, then /usr/sbin where Debian puts
// it), or an error wrapping ErrNotInstalled.
func Find() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range installPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("pgbouncer: %w", ErrNotInstalled)
}

func (b *Bouncer) writeConfig(opts Options) error {
	settings := map[string]string{
		"listen_addr":               "127.0.0.1",
		"listen_port":               strconv.Itoa(b.port),
		"unix_socket_dir":           "",
		"auth_type":                 "trust",
		"auth_file":                 filepath.Join(b.dir, "userlist.txt"),
		"logfile":                   b.logPath,
		"pool_mode":                 "transaction",
		"default_pool_size":         "20",
		"max_client_conn":           "1000",
		"max_db_connections":        "0",
		"ignore_startup_parameters": "extra_float_digits",
		// Reconnect to a restarted server quickly (default 15s).
		"server_login_retry": "1",
		"log_connections":    "0",
		"log_disconnections": "0",
		"log_pooler_errors":  "1",
	}
	if opts.PoolMode != "" {
		settings["pool_mode"] = opts.PoolMode
	}
	if opts.PoolSize > 0 {
		settings["default_pool_size"] = strconv.Itoa(opts.PoolSize)
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ini strings.Builder
	host := opts.UpstreamHost
	if host == "" {
		host = "127.0.0.1"
	}
	fmt.Fprintf(&ini, "[databases]\n* = host=%s port=%d\n\n[pgbouncer]\n", host, opts.UpstreamPort)
	for _, k := range keys {
		fmt.Fprintf(&ini, "%s = %s\n", k, settings[k])
	}
	if err := os.WriteFile(filepath.Join(b.dir, "pgbouncer.ini"), []byte(ini.String()), 0o644); err != nil {
		return fmt.Errorf("pgbouncer: %w", err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "userlist.txt"), []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return fmt.Errorf("pgbouncer: %w", err)
	}
	return nil
}

func (b *Bouncer) start(ctx context.Context, bin string, cred *syscall.Credential, opts Options) error {
	cmd := exec.Command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
	cmd.Dir = b.dir
	out, err := os.OpenFile(filepath.Join(b.dir, "stderr.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("pgbouncer: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the starting thread exits: keep it alive as
		// long as the child (see pgembed).
		runtime.LockOSThread()
		defer out.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("pgbouncer: starting %s: %w", bin, err)
	}
	b.mu.Lock()
	b.proc, b.exited = cmd.Process, exited
	b.mu.Unlock()
	if opts.Logf != nil {
		opts.Logf("pgbouncer: pid %d on 127.0.0.1:%d -> 127.0.0.1:%d", cmd.Process.Pid, b.port, opts.UpstreamPort)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-exited:
			b.mu.Lock()
			b.proc = nil
			b.mu.Unlock()
			return fmt.Errorf("pgbouncer exited at start:\n%s", b.logs())
		default:
		}
		conn, err := pgx.Connect(ctx, b.URL("postgres")+"&connect_timeout=5")
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(context.Background())
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer did not pass a query through: %v (last: %v)\n%s", ctx.Err(), lastErr, b.logs())
		case <-exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logs returns pgbouncer's stderr and log file, for error messages.
func (b *Bouncer) logs() string {
	var s strings.Builder
	for _, f := range []string{"stderr.log", "pgbouncer.log"} {
		data, _ := os.ReadFile(filepath.Join(b.dir, f))
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		fmt.Fprintf(&s, "--- %s\n%s\n", f, strings.Join(lines, "\n"))
	}
	return s.String()
}

// Port is the loopback port pgbouncer listens on.
func (b *Bouncer) Port() int { return b.port }

// LogPath is pgbouncer's log file.
func (b *Bouncer) LogPath() string { return b.logPath }

// URL returns a connection string for database db through pgbouncer, as user postgres,
// with default_query_exec_mode=exec (no prepared statements; see the package doc).
func (b *Bouncer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&default_query_exec_mode=%s", b.port, db, ExecMode)
}

// Via rewrites a postgres:// URL of the upstream server (e.g. from pgtest.NewDB) to reach
// the same database through pgbouncer, setting default_query_exec_mode to mode ("exec" or
// "simple_protocol"; "" means ExecMode).
func (b *Bouncer) Via(serverURL, mode string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("pgbouncer: %w", err)
	}
	if mode == "" {
		mode = ExecMode
	}
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	q := u.Query()
	q.Set("default_query_exec_mode", mode)
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Stop shuts pgbouncer down (SIGTERM: immediate shutdown, clients disconnected), waits
// for it, and removes its directory. Idempotent.
func (b *Bouncer) Stop() error {
	b.mu.Lock()
	proc, exited := b.proc, b.exited
	b.proc = nil
	b.mu.Unlock()
	var err error
	if proc != nil {
		_ = proc.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = proc.Kill()
			<-exited
			err = errors.New("pgbouncer: did not stop within 10s of SIGTERM; killed it")
		}
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
	return err
}

// Require skips tb when pgbouncer is not installed, with a message that says how to
// install it; under CI=true it fails tb with that message instead, so that CI never
// passes without the PgBouncer tests. Call it before any costly setup.
func Require(tb testing.TB) {
	tb.Helper()
	if _, err := Find(); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%v\n(CI=true: PgBouncer tests must run, not skip)", err)
			return
		}
		tb.Skipf("%v\n(skipped; under CI=true this fails)", err)
	}
}

// ForTest starts pgbouncer in front of the server of serverURL (a postgres:// URL, e.g.
// pgtest.URL) for the test and stops it when the test ends. Without pgbouncer installed
// it skips tb, or fails it under CI=true ([Require]). The server must let user
// "postgres" in without a password, as pgembed clusters do.
func ForTest(tb testing.TB, serverURL string, opts Options) *Bouncer {
	tb.Helper()
	Require(tb)
	u, err := url.Parse(serverURL)
	if err != nil {
		tb.Fatalf("pgbouncer: %v", err)
	}
	opts.UpstreamHost = u.Hostname()
	if opts.UpstreamPort, err = strconv.Atoi(u.Port()); err != nil {
		opts.UpstreamPort = 5432
	}
	if opts.Logf == nil {
		opts.Logf = tb.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Start(ctx, opts)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := b.Stop(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return b
}
