// Package pgembed runs a throwaway PostgreSQL cluster from locally installed
// binaries, for tests and for example servers.
//
// Start creates a fresh data directory with initdb in a new temporary
// directory, starts the postgres server as a child process listening only on
// 127.0.0.1 (plus a unix socket inside the temporary directory), and waits
// until it accepts connections. Authentication is "trust"; the superuser is
// "postgres". The server is tuned for speed, not durability (fsync=off,
// synchronous_commit=off, full_page_writes=off) unless [Options.Durable] is
// set, so never put data you want to keep in it.
//
// The server is started directly (not daemonized through pg_ctl) so that the
// kernel kills it if the Go process dies without calling Stop
// (Linux parent-death signal). A temporary directory left behind by a killed
// process is removed by a later Start.
//
// When the Go process runs as root, initdb and postgres run as the "postgres"
// OS user, because PostgreSQL refuses to run as root.
package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// InstallHelp explains how to make PostgreSQL available. It is part of the
// error returned by Start when no binaries are found.
const InstallHelp = "PostgreSQL server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql/*/bin.\n" +
	"Install them, e.g.:\n" +
	"  Debian/Ubuntu: apt-get install postgresql\n" +
	"  Fedora/RHEL:   dnf install postgresql-server\n" +
	"  macOS:         brew install postgresql\n" +
	"or set DATABASE_URL to an existing server, e.g.\n" +
	"  DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ErrNotInstalled is returned (wrapped) by Start when no PostgreSQL binaries
// are found. Its message is InstallHelp.
var ErrNotInstalled = errors.New(InstallHelp)

// Options configure Start. The zero value is valid.
type Options struct {
	// Port is the TCP port on 127.0.0.1 to listen on. 0 picks a free port
	// (and retries with another one if it is taken before the server binds).
	Port int

	// Logf, if non-nil, receives progress messages (one line each, no
	// trailing newline needed).
	Logf func(format string, args ...any)

	// Durable runs the server with PostgreSQL's durable defaults (fsync=on,
	// synchronous_commit=on, full_page_writes=on): every commit waits for its
	// WAL flush, as on a production server. For benchmarks of commit cost and
	// crash tests; the data directory is still thrown away by Stop.
	Durable bool

	// Settings are extra server settings passed as "-c name=value"; they
	// override the defaults and Durable (e.g. {"max_connections": "50"}).
	Settings map[string]string

	// StartTimeout bounds how long to wait for the server to accept
	// connections after each start. 0 means 60 seconds. The context passed
	// to Start / StartAgain / Restart can shorten it.
	StartTimeout time.Duration
}

// defaultSettings are server settings for fast, disposable test clusters.
var defaultSettings = map[string]string{
	"listen_addresses":           "127.0.0.1",
	"fsync":                      "off",
	"synchronous_commit":         "off",
	"full_page_writes":           "off",
	"max_connections":            "300",
	"shared_buffers":             "128MB",
	"logging_collector":          "off",
	"log_min_messages":           "warning",
	"dynamic_shared_memory_type": "posix",
}

// durableSettings replace the speed settings of defaultSettings when Options.Durable
// is set.
var durableSettings = map[string]string{
	"fsync":              "on",
	"synchronous_commit": "on",
	"full_page_writes":   "on",
}

// Cluster is a running (or stopped) throwaway PostgreSQL server.
// Its methods are safe for concurrent use.
type Cluster struct {
	opts    Options
	bin     string // directory with initdb and postgres
	dir     string // temporary base directory, removed by Stop
	dataDir string
	sockDir string
	logPath string
	cred    *syscall.Credential // nil when not running as root

	mu      sync.Mutex
	port    int
	srv     *server // running postmaster, nil when stopped
	removed bool    // Stop has run
}

// server is one run of the postmaster process.
type server struct {
	proc   *os.Process
	exited chan struct{} // closed when proc has exited
	err    error         // exit status; read only after exited is closed
}

// Start creates and starts a new cluster. On error nothing is left behind.
// The returned error wraps ErrNotInstalled when no binaries are found; when
// the server fails to start it includes the tail of the server log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, bin: bin}
	if c.cred, err = ServiceCredential(); err != nil {
		return nil, err
	}
	removeStale(c.logf)
	if err := c.initdb(ctx); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	if err := c.StartAgain(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// URL returns a postgres:// URL for database "postgres" as superuser
// "postgres" over TCP. It stays valid across Restart.
func (c *Cluster) URL() string {
	return c.DatabaseURL("postgres")
}

// DatabaseURL is like URL but for the named database.
func (c *Cluster) DatabaseURL(db string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Port returns the TCP port on 127.0.0.1.
func (c *Cluster) Port() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.port
}

// DataDir returns the data directory (PGDATA).
func (c *Cluster) DataDir() string { return c.dataDir }

// SocketDir returns the directory holding the server's unix socket.
func (c *Cluster) SocketDir() string { return c.sockDir }

// LogPath returns the server log file.
func (c *Cluster) LogPath() string { return c.logPath }

// Running reports whether the server process is alive.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv == nil {
		return false
	}
	select {
	case <-c.srv.exited:
		return false
	default:
		return true
	}
}

// Stop shuts the server down ("fast" mode) and removes the temporary
// directory. It is idempotent; later calls return nil. The cluster cannot be
// used afterwards.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.removed {
		c.mu.Unlock()
		return nil
	}
	c.removed = true
	c.mu.Unlock()
	err := c.StopFast()
	if rerr := os.RemoveAll(c.dir); rerr != nil && err == nil {
		err = fmt.Errorf("pgembed: removing %s: %w", c.dir, rerr)
	}
	return err
}

// StopFast shuts the server down in "fast" mode (SIGINT: open transactions
// are rolled back and clients disconnected) and waits up to 30 seconds for
// it to exit, then kills it. The data directory and port are kept, so
// StartAgain can bring the same cluster back. Stopping a stopped cluster is
// a no-op.
func (c *Cluster) StopFast() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked(syscall.SIGINT, 30*time.Second)
}

// Kill stops the server abruptly (SIGQUIT: immediate shutdown, crash
// recovery on next start), like a crash. The data directory and port are
// kept for StartAgain.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked(syscall.SIGQUIT, 10*time.Second)
}

func (c *Cluster) stopLocked(sig syscall.Signal, timeout time.Duration) error {
	srv := c.srv
	if srv == nil {
		return nil
	}
	c.srv = nil
	_ = srv.proc.Signal(sig)
	select {
	case <-srv.exited:
		return nil
	case <-time.After(timeout):
	}
	_ = srv.proc.Kill()
	<-srv.exited
	return fmt.Errorf("pgembed: server did not stop within %v after %v; killed it", timeout, sig)
}

// StartAgain starts the server of a stopped cluster on the same port and
// data directory and waits until it accepts connections. Starting a running
// cluster is a no-op.
func (c *Cluster) StartAgain(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return errors.New("pgembed: cluster was stopped and removed")
	}
	if c.srv != nil {
		return nil
	}
	pickPort := c.port == 0 && c.opts.Port == 0
	for attempt := 1; ; attempt++ {
		if c.port == 0 {
			c.port = c.opts.Port
			if c.port == 0 {
				p, err := FreePort()
				if err != nil {
					return err
				}
				c.port = p
			}
		}
		err := c.startLocked(ctx)
		if err == nil {
			return nil
		}
		// Another process may have grabbed the port between freePort and
		// the server binding it.
		if pickPort && attempt < 5 && errors.Is(err, errAddrInUse) {
			c.logf("pgembed: port %d taken, retrying with another one", c.port)
			c.port = 0
			continue
		}
		return err
	}
}

// Restart stops the server in "fast" mode and starts it again on the same
// port and data directory, like "pg_ctl restart -m fast". Clients see their
// connections terminated and must reconnect.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.StopFast(); err != nil {
		return err
	}
	return c.StartAgain(ctx)
}

var errAddrInUse = errors.New("address already in use")

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

// initdb creates the temporary directory layout and runs initdb.
func (c *Cluster) initdb(ctx context.Context) error {
	dir, err := os.MkdirTemp(TempRoot(c.cred), "pgembed-")
	if err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	c.dir = dir
	c.dataDir = filepath.Join(dir, "data")
	c.sockDir = filepath.Join(dir, "sock")
	c.logPath = filepath.Join(dir, "postgres.log")
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	if err := os.Mkdir(c.sockDir, 0o700); err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	if c.cred != nil {
		for _, p := range []string{dir, c.sockDir} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("pgembed: %w", err)
			}
		}
	}
	c.logf("pgembed: initdb %s (binaries in %s)", c.dataDir, c.bin)
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "initdb"),
		"-D", c.dataDir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--no-locale")
	c.prepare(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgembed: initdb failed: %w\n%s", err, out)
	}
	c.logf("pgembed: initdb done in %v", time.Since(start).Round(time.Millisecond))
	return nil
}

// prepare sets the working directory, environment and OS user of cmd.
func (c *Cluster) prepare(cmd *exec.Cmd) {
	cmd.Dir = c.dir
	var env []string
	for _, kv := range os.Environ() {
		// PG* variables (PGDATA, PGPORT, ...) would confuse the tools.
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: c.cred,
		// Kill the child if we die.
		Pdeathsig: syscall.SIGKILL,
	}
}

// startLocked starts postgres on c.port and waits for it to be ready.
func (c *Cluster) startLocked(ctx context.Context) error {
	args := []string{"-D", c.dataDir, "-p", strconv.Itoa(c.port), "-k", c.sockDir}
	settings := map[string]string{}
	for k, v := range defaultSettings {
		settings[k] = v
	}
	if c.opts.Durable {
		for k, v := range durableSettings {
			settings[k] = v
		}
	}
	for k, v := range c.opts.Settings {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}

	logFile, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	logStart, _ := logFile.Seek(0, io.SeekEnd)
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
	c.prepare(cmd)
	cmd.Stdout = logFile
	cmd.Stderr = logFile

	// The parent-death signal fires when the OS thread that started the
	// child exits, not the process. Start and wait from a goroutine locked
	// to its thread, so that thread lives at least as long as the child.
	srv := &server{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		defer logFile.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		srv.proc = cmd.Process
		started <- nil
		srv.err = cmd.Wait()
		close(srv.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("pgembed: starting postgres: %w", err)
	}
	c.srv = srv
	c.logf("pgembed: postgres started, pid %d, port %d", srv.proc.Pid, c.port)

	// Wait for readiness without holding c.mu, so that URL etc. still work.
	c.mu.Unlock()
	err = c.waitReady(ctx, srv)
	c.mu.Lock()
	if err == nil {
		c.logf("pgembed: ready at %s", fmt.Sprintf("127.0.0.1:%d", c.port))
		return nil
	}
	if c.srv == srv {
		_ = c.stopLocked(syscall.SIGQUIT, 10*time.Second)
	}
	tail := c.logTail(logStart, 30)
	if strings.Contains(tail, "Address already in use") || strings.Contains(tail, "could not create any TCP/IP sockets") {
		err = fmt.Errorf("%w: %w", err, errAddrInUse)
	}
	return fmt.Errorf("pgembed: postgres on port %d did not become ready: %w\nlast lines of %s:\n%s", c.port, err, c.logPath, tail)
}

// waitReady connects until the server answers a query, the server exits,
// or the start timeout / ctx expires.
func (c *Cluster) waitReady(ctx context.Context, srv *server) error {
	timeout := c.opts.StartTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() { // abort a pending connect when the server exits
		select {
		case <-srv.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", c.port)
	var lastErr error
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(context.Background())
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-srv.exited:
			return fmt.Errorf("server exited: %v", srv.err)
		default:
		}
		select {
		case <-srv.exited:
			return fmt.Errorf("server exited: %v", srv.err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last connect error: %v)", ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail returns the last n lines of the log written since offset from.
func (c *Cluster) logTail(from int64, n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(cannot read log: " + err.Error() + ")"
	}
	if from >= 0 && from <= int64(len(b)) {
		b = b[from:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// debianBinGlob is where Debian and Ubuntu install the server binaries, one directory per
// major version (a variable for the test of a machine without them).
var debianBinGlob = "/usr/lib/postgresql/*/bin"

// findBinDir returns the directory containing initdb and postgres: the one
// of initdb on PATH, else the newest /usr/lib/postgresql/<version>/bin.
func findBinDir() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		// Resolve symlinks such as /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir, err := filepath.Abs(filepath.Dir(p)); err == nil && has(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(debianBinGlob)
	best, bestVer := "", -1.0
	for _, d := range dirs {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		if err == nil && v > bestVer && has(d) {
			best, bestVer = d, v
		}
	}
	if best != "" {
		return best, nil
	}
	return "", fmt.Errorf("pgembed: %w", ErrNotInstalled)
}

// ServiceCredential returns the credential to run PostgreSQL's programs (and PgBouncer)
// with: the "postgres" OS user when this process is root (they refuse to run as root),
// with no supplementary groups; nil otherwise (run as the current user). An error says
// how to create the user.
func ServiceCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgembed: PostgreSQL refuses to run as root and the %q OS user is missing (%w); "+
			"create it (useradd --system postgres) or run as a non-root user", "postgres", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Groups nil: supplementary groups are cleared (none of root's).
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// TempRoot is where temporary server directories go: os.TempDir(), unless the server runs
// as another user (cred not nil) who could not reach it (a private TMPDIR of root's), then
// /tmp.
func TempRoot(cred *syscall.Credential) string {
	dir := os.TempDir()
	if cred == nil {
		return dir
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgembed: picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// removeStale deletes temporary directories of earlier clusters whose owning
// process is gone (killed before it could call Stop). Their servers died
// with their owners via the parent-death signal.
func removeStale(logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgembed-*"))
	if os.TempDir() != "/tmp" { // where TempRoot puts them when TMPDIR is private
		more, _ := filepath.Glob("/tmp/pgembed-*")
		dirs = append(dirs, more...)
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if p, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && alive(p) {
				continue
			}
		}
		if os.RemoveAll(d) == nil {
			logf("pgembed: removed stale %s", d)
		}
	}
}

// alive reports whether a process with this pid exists and is not a zombie
// (in containers whose PID 1 does not reap, dead orphans stay zombies).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
