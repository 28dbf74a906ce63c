package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// buildServer builds this command into a temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is a running server binary.
type process struct {
	cmd    *exec.Cmd
	url    string
	stdout *bytes.Buffer // everything after the listening line
	stderr *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs bin with args and databaseURL, and waits for its "listening on" line.
func start(t *testing.T, bin, databaseURL string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL)
	p := &process{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	lines := make(chan string, 1)
	rest := make(chan struct{})
	go func() {
		r := bufio.NewReader(out)
		line, err := r.ReadString('\n')
		if err == nil {
			lines <- line
		}
		close(lines)
		io.Copy(p.stdout, r)
		close(rest)
	}()
	go func() {
		<-rest
		p.done <- cmd.Wait()
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("server exited without a listening line; stderr:\n%s", p.stderr)
		}
		u, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "listening on ")
		if !ok || !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("first stdout line %q, want \"listening on http://127.0.0.1:PORT\"", line)
		}
		p.url = u
	case <-time.After(90 * time.Second):
		t.Fatalf("no listening line after 90s; stderr:\n%s", p.stderr)
	}
	return p
}

// stop sends SIGTERM and returns the exit error.
func (p *process) stop(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("server still running 60s after SIGTERM; stderr:\n%s", p.stderr)
		return nil
	}
}

func post(t *testing.T, url, account, key, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if account != "" {
		req.Header.Set("X-Account-ID", account)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// The real binary, on a DATABASE_URL database: it serves, and on SIGTERM finishes the
// request in flight, then exits 0.
func TestBinary(t *testing.T) {
	bin := buildServer(t)
	dbURL := pgtest.NewDB(t)
	p := start(t, bin, dbURL, "-addr", "127.0.0.1:0", "-delay", "300ms")

	body := `{"amount":4200,"currency":"EUR","description":"binary"}`
	code, h, first := post(t, p.url+"/payments", "acct_bin", "bin-1", body)
	if code != http.StatusCreated || h.Get("Location") == "" {
		t.Fatalf("create: %d %v %s", code, h, first)
	}
	code, h2, again := post(t, p.url+"/payments", "acct_bin", "bin-1", body)
	if code != http.StatusCreated || h2.Get("Idempotent-Replayed") != "true" || again != first || h2.Get("Location") != h.Get("Location") {
		t.Errorf("retry: %d %v %s", code, h2, again)
	}
	if code, _, b := post(t, p.url+"/payments", "", "bin-2", body); code != http.StatusUnauthorized {
		t.Errorf("no account: %d %s", code, b)
	}
	resp, err := http.Get(p.url + "/payments/nope")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET without account: %d", resp.StatusCode)
		}
	}

	// A request in flight when SIGTERM arrives completes: start one, wait until its key is
	// claimed (observed in the database, not guessed with a sleep), then signal.
	inflight := make(chan int, 1)
	go func() {
		code, _, _ := post(t, p.url+"/payments", "acct_bin", "bin-inflight", body)
		inflight <- code
	}()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE key = 'bin-inflight'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the in-flight request never claimed its key")
		}
		time.Sleep(5 * time.Millisecond) // polling an observable state, not ordering by time
	}
	if err := p.stop(t); err != nil {
		t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, p.stderr)
	}
	if code := <-inflight; code != http.StatusCreated {
		t.Errorf("in-flight request during shutdown: %d, want 201", code)
	}
	var rows int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Errorf("%d payments, want 2", rows)
	}
	if p.stdout.Len() != 0 {
		t.Errorf("stdout after the listening line: %q", p.stdout)
	}
	if s := p.stderr.String(); !strings.Contains(s, "shutting down") || strings.Contains(s, "embedded") {
		t.Errorf("stderr:\n%s", s)
	}
}

// Without DATABASE_URL the binary starts an embedded PostgreSQL, says so, and removes it
// on exit.
func TestBinaryEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	bin := buildServer(t)
	p := start(t, bin, "", "-addr", "127.0.0.1:0")
	code, _, b := post(t, p.url+"/payments", "acct_emb", "emb-1", `{"amount":1,"currency":"JPY"}`)
	if code != http.StatusCreated {
		t.Errorf("create: %d %s", code, b)
	}
	if err := p.stop(t); err != nil {
		t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, p.stderr)
	}
	stderr := p.stderr.String()
	if !strings.Contains(stderr, "embedded throwaway PostgreSQL") {
		t.Errorf("stderr does not say it started an embedded PostgreSQL:\n%s", stderr)
	}
	// Its data directory is gone.
	for _, line := range strings.Split(stderr, "\n") {
		if _, dir, ok := strings.Cut(line, "initdb "); ok {
			dir = strings.Fields(dir)[0]
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("data directory %s still there after exit (%v)", dir, err)
			}
		}
	}
}
