package pgembed_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgembed"
)

func start(t *testing.T, opts pgembed.Options) *pgembed.Cluster {
	t.Helper()
	opts.Logf = t.Logf
	c, err := pgembed.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStartStop(t *testing.T) {
	c := start(t, pgembed.Options{Settings: map[string]string{"work_mem": "7MB"}})
	if got := query(t, c.URL(), "SHOW work_mem"); got != "7MB" {
		t.Errorf("work_mem = %q, want 7MB", got)
	}
	if got := query(t, c.URL(), "SHOW max_connections"); got != "300" {
		t.Errorf("max_connections = %q, want 300", got)
	}
	if got := query(t, c.URL(), "SHOW fsync"); got != "off" {
		t.Errorf("fsync = %q, want off", got)
	}
	// Unix socket works too.
	sock := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", c.SocketDir(), c.Port())
	if got := query(t, sock, "SELECT current_user"); got != "postgres" {
		t.Errorf("current_user = %q", got)
	}
	dir := filepath.Dir(c.DataDir())
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still exists after Stop (stat: %v)", dir, err)
	}
	if c.Running() {
		t.Fatal("Running after Stop")
	}
	if err := c.StartAgain(context.Background()); err == nil {
		t.Fatal("StartAgain after Stop succeeded")
	}
}

// Durable turns on what the speed defaults turn off; Settings still win.
func TestDurable(t *testing.T) {
	c := start(t, pgembed.Options{Durable: true, Settings: map[string]string{"full_page_writes": "off"}})
	for setting, want := range map[string]string{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "off"} {
		if got := query(t, c.URL(), "SHOW "+setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
}

func TestKillAndStartAgain(t *testing.T) {
	c := start(t, pgembed.Options{})
	query(t, c.URL(), "SELECT 1")
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if c.Running() {
		t.Fatal("Running after Kill")
	}
	if _, err := pgx.Connect(context.Background(), c.URL()); err == nil {
		t.Fatal("connect succeeded while stopped")
	}
	if err := c.StartAgain(context.Background()); err != nil {
		t.Fatal(err)
	}
	query(t, c.URL(), "SELECT 1")
}

// TestPortInUse checks that a start failure reports the server log.
func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := pgembed.Start(context.Background(), pgembed.Options{Port: port, StartTimeout: 20 * time.Second})
	if err == nil {
		c.Stop()
		t.Fatal("Start on a taken port succeeded")
	}
	if !strings.Contains(err.Error(), "could not bind") {
		t.Fatalf("error does not include the log tail: %v", err)
	}
	t.Log(err)
}

// TestDiesWithParent checks that the server dies when the process that
// started it is killed, and that the next Start removes the leftover files.
func TestDiesWithParent(t *testing.T) {
	if os.Getenv("PGEMBED_HELPER") == "1" {
		c, err := pgembed.Start(context.Background(), pgembed.Options{})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		b, _ := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
		pid, _, _ := strings.Cut(string(b), "\n")
		fmt.Println("READY", pid, filepath.Dir(c.DataDir()))
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiesWithParent$")
	cmd.Env = append(os.Environ(), "PGEMBED_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "READY" {
		t.Fatalf("helper said %q", line)
	}
	pid, _ := strconv.Atoi(f[1])
	dir := f[2]

	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("postmaster %d still alive after its parent was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("expected leftover %s: %v", dir, err)
	}
	start(t, pgembed.Options{})
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover %s not removed by next Start (stat: %v)", dir, err)
	}
}

// alive reports whether pid exists and is not a zombie (an orphaned zombie
// may linger if PID 1 in a container does not reap).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}
