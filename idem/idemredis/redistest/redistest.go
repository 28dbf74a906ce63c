// Package redistest gives tests a real, throwaway Redis server: Debian's redis-server
// (package redis-server), started on a free loopback port with no persistence, and
// stopped and deleted when the test ends. There is no in-memory fake.
//
//	srv := redistest.Start(t)                  // skips with a reason when redis-server is absent (fails under CI=true)
//	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
//
// A test of faults can stop the server (Kill: SIGKILL, what a crash does) and start it
// again on the same port (Restart): with no persistence, a restart loses every key.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is the redis-server the package starts: $REDIS_SERVER when set, else
// redis-server on $PATH (Debian installs it as /usr/bin/redis-server).
func Binary() (string, error) {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b, nil
	}
	return exec.LookPath("redis-server")
}

// Server is one redis-server process listening on 127.0.0.1.
type Server struct {
	bin  string
	dir  string
	port int
	args []string

	mu     sync.Mutex
	proc   *os.Process // nil while stopped
	exited chan error  // receives the process's exit
}

// Start starts a redis-server for t with the extra configuration args (redis-server
// command-line form, e.g. "--maxmemory", "10mb"), waits until it answers PING, and
// stops it when t ends. Without a redis-server it skips t, saying how to install one;
// under CI=true it fails t instead.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		msg := "redistest: no redis-server (apt-get install redis-server, or set REDIS_SERVER)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s, err := Launch(t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Launch starts a redis-server outside a test (a demo, a benchmark's setup), in dir (its
// working directory), with the extra args; the caller stops it with Kill.
func Launch(dir string, args ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, fmt.Errorf("redistest: no redis-server (apt-get install redis-server, or set REDIS_SERVER): %w", err)
	}
	s := &Server{bin: bin, dir: dir, args: args}
	if err := s.start(0); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Pid is the server process's id (0 while it is stopped): for a benchmark that reads
// its CPU time from /proc.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid
}

// Kill stops the server with SIGKILL and waits for it to exit: a crash, every key lost
// (the server keeps none on disk).
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.Kill()
	<-s.exited
	s.proc = nil
}

// Restart starts the server again on its port after Kill, empty, and waits until it
// answers. It panics when the server cannot start (a test's failure: the port was taken).
func (s *Server) Restart() {
	if err := s.start(s.port); err != nil {
		panic(err)
	}
}

// start runs redis-server on port (0: a free one, retried when another process takes
// it between the pick and the bind).
func (s *Server) start(port int) error {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		p := port
		if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return err
			}
		}
		if lastErr = s.startOn(p); lastErr == nil {
			s.port = p
			return nil
		}
		if port != 0 {
			break
		}
	}
	return lastErr
}

func (s *Server) startOn(port int) error {
	args := append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
		"--loglevel", "warning",
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	// The server dies with the process that started it (a test binary or a demo killed
	// with SIGKILL leaves no redis-server behind). The parent-death signal fires when the
	// thread that started the child exits, so that thread waits for the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started, exited := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	var (
		logMu sync.Mutex
		log   strings.Builder
	)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ping(port) {
			s.mu.Lock()
			s.proc, s.exited = cmd.Process, exited
			s.mu.Unlock()
			return nil
		}
		select {
		case err := <-exited:
			logMu.Lock()
			defer logMu.Unlock()
			return fmt.Errorf("redistest: redis-server on port %d exited (%v):\n%s", port, err, log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redistest: redis-server on port %d did not answer within 10s", port)
}

// ping reports whether a Redis server on 127.0.0.1:port answers PING.
func ping(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
