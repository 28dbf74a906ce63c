package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/gen"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The policies of the test build of the server (the spec says lease 30s, timeout 10s).
// Lease < slowDelay < Timeout: a business run of slowDelay outlives its lease but not its
// timeout.
const (
	shortLease   = 3 * time.Second
	shortTimeout = 6 * time.Second
	slowDelay    = 5 * time.Second
)

// ---- building the servers ----------------------------------------------------------

var build struct {
	once     sync.Once
	payments string // ../cmd/server with shortLease and shortTimeout
	sessions string // testdata/sessions
	provider string // ../provider/cmd/provider, as committed
	err      error
}

// servers returns the paths of the test builds, building them on first use.
func servers(t *testing.T) (payments, sessions string) {
	t.Helper()
	build.once.Do(func() {
		start := time.Now()
		build.payments, build.sessions, build.provider, build.err = buildServers()
		t.Logf("built the test servers in %v", time.Since(start).Round(time.Millisecond))
	})
	if build.err != nil {
		t.Fatalf("building the test servers: %v", build.err)
	}
	return build.payments, build.sessions
}

// providerServer returns the path of the payment-provider stand-in's build.
func providerServer(t *testing.T) string {
	t.Helper()
	servers(t)
	return build.provider
}

func buildServers() (payments, sessions, provider string, err error) {
	payments, sessions, err = buildPaymentServers()
	if err != nil {
		return "", "", "", err
	}
	return payments, sessions, filepath.Join(filepath.Dir(payments), "provider"), nil
}

func buildPaymentServers() (payments, sessions string, err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	dir, err := workDir()
	if err != nil {
		return "", "", err
	}
	overlay := map[string]string{}
	generate := func(spec, pkg, target string) error {
		// The payments handlers are generated with -client, as committed (client.gen.go
		// needs oapi-codegen's client in oapi.gen.go).
		files, err := gen.Generate(gen.Options{Spec: spec, Package: pkg, Client: pkg == "api"})
		if err != nil {
			return err
		}
		for _, f := range files {
			p := filepath.Join(dir, pkg+"-"+filepath.Base(target)+"-"+f.Name)
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				return err
			}
			overlay[filepath.Join(target, f.Name)] = p
			if f.Name == gen.IdempotentFile && pkg == "api" {
				if err := checkShortPolicies(f.Data); err != nil {
					return err
				}
			}
		}
		return nil
	}

	// The payments server, its handlers regenerated with the short lease and timeout.
	spec, err := os.ReadFile(filepath.Join(root, "examples", "payments", "openapi.yaml"))
	if err != nil {
		return "", "", err
	}
	short, err := shortPolicies(spec)
	if err != nil {
		return "", "", err
	}
	shortSpec := filepath.Join(dir, "openapi.yaml")
	if err := os.WriteFile(shortSpec, short, 0o644); err != nil {
		return "", "", err
	}
	if err := generate(shortSpec, "api", filepath.Join(root, "examples", "payments", "api")); err != nil {
		return "", "", fmt.Errorf("generating the payments handlers: %w", err)
	}

	// The sessions server: a package that exists only in the overlay.
	sessDir := filepath.Join(root, "examples", "payments", "reliability", "internal", "sessions")
	if err := generate(filepath.Join("testdata", "sessions", "openapi.yaml"), "main", sessDir); err != nil {
		return "", "", fmt.Errorf("generating the sessions handlers: %w", err)
	}
	mainGo, err := filepath.Abs(filepath.Join("testdata", "sessions", "main.go"))
	if err != nil {
		return "", "", err
	}
	overlay[filepath.Join(sessDir, "main.go")] = mainGo

	ov, _ := json.Marshal(map[string]any{"Replace": overlay})
	ovPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
		return "", "", err
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", "", fmt.Errorf("the go command is needed to build the servers: %w", err)
	}
	bin := filepath.Join(dir, "bin")
	cmd := exec.Command(goCmd, "build", "-overlay", ovPath, "-o", bin+string(filepath.Separator),
		"./payments/cmd/server", "./payments/reliability/internal/sessions", "./payments/provider/cmd/provider")
	cmd.Dir = filepath.Join(root, "examples") // the examples module
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return filepath.Join(bin, "server"), filepath.Join(bin, "sessions"), nil
}

// shortPolicies rewrites the spec's marker defaults (and any marker's own lease and
// timeout) to shortLease and shortTimeout.
func shortPolicies(spec []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	set := func(m *yaml.Node, key, val string) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				m.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val}
				return
			}
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val})
	}
	get := func(m *yaml.Node, key string) *yaml.Node {
		for i := 0; m != nil && m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	defaults := get(root, gen.DefaultsExt)
	if defaults == nil {
		defaults = &yaml.Node{Kind: yaml.MappingNode}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: gen.DefaultsExt}, defaults)
	}
	set(defaults, "lease", shortLease.String())
	set(defaults, "timeout", shortTimeout.String())
	if paths := get(root, "paths"); paths != nil {
		for i := 1; i < len(paths.Content); i += 2 {
			item := paths.Content[i]
			for j := 1; j < len(item.Content); j += 2 {
				if m := get(item.Content[j], gen.MarkerExt); m != nil && m.Kind == yaml.MappingNode {
					set(m, "lease", shortLease.String())
					set(m, "timeout", shortTimeout.String())
				}
			}
		}
	}
	return yaml.Marshal(&doc)
}

func checkShortPolicies(code []byte) error {
	lease := regexp.MustCompile(`Lease:\s+(.+),`).FindAllSubmatch(code, -1)
	timeout := regexp.MustCompile(`Timeout:\s+(.+),`).FindAllSubmatch(code, -1)
	if len(lease) == 0 || len(lease) != len(timeout) {
		return fmt.Errorf("regenerated handlers: %d leases and %d timeouts, want one each per operation", len(lease), len(timeout))
	}
	wantLease := fmt.Sprintf("%d * time.Second", int(shortLease.Seconds()))
	wantTimeout := fmt.Sprintf("%d * time.Second", int(shortTimeout.Seconds()))
	for i := range lease {
		if string(lease[i][1]) != wantLease || string(timeout[i][1]) != wantTimeout {
			return fmt.Errorf("regenerated handlers: lease %s, timeout %s; want %v and %v", lease[i][1], timeout[i][1], shortLease, shortTimeout)
		}
	}
	return nil
}

// moduleRoot is the repository's root: the directory of the go.mod of
// github.com/idemgen/idemgen (the examples are a module of their own inside it).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/idemgen/idemgen\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("module root (go.mod of github.com/idemgen/idemgen) not found")
		}
		dir = parent
	}
}

// workDir returns a directory for this test process's builds. TestMain cannot remove it
// (pgtest.Main exits), so directories of earlier processes that are gone are removed here.
func workDir() (string, error) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "idemgen-reliability-*"))
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "idemgen-reliability-"))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) != nil {
			os.RemoveAll(d)
		}
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("idemgen-reliability-%d", os.Getpid()))
	return dir, os.MkdirAll(dir, 0o755)
}

// ---- server processes --------------------------------------------------------------

// proc is a server process that printed "listening on http://ADDR".
type proc struct {
	name   string
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	logs   *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startPayments starts a payments server replica on databaseURL.
func startPayments(t *testing.T, name, databaseURL string, args ...string) *proc {
	t.Helper()
	bin, _ := servers(t)
	return startProc(t, name, bin, databaseURL, append([]string{"-shutdown-timeout", "2s", "-max-conns", "16"}, args...)...)
}

func startProc(t *testing.T, name, bin, databaseURL string, args ...string) *proc {
	t.Helper()
	p, err := startProcErr(t, name, bin, databaseURL, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startProcErr is startProc for goroutines other than the test's: it returns its error.
func startProcErr(t *testing.T, name, bin, databaseURL string, args ...string) (*proc, error) {
	return startProcEnv(t, name, bin, []string{"DATABASE_URL=" + databaseURL}, args...)
}

// startProcEnv starts bin with the variables of env (NAME=value) set over this process's.
func startProcEnv(t *testing.T, name, bin string, vars []string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	env := append([]string(nil), vars...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(vars, func(v string) bool { return strings.HasPrefix(v, k+"=") }) {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{}), logs: &lockedBuffer{}}
	cmd.Stderr = p.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// The server dies with the test process (parent-death signal). The signal fires when
	// the thread that started the child exits, so that thread waits for the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- %s (%s) log:\n%s", name, p.url, tail(p.logs.String(), 40))
		}
	})
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				listening <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p.url = <-listening:
	case <-p.exited:
		return nil, fmt.Errorf("%s exited at start:\n%s", name, tail(p.logs.String(), 40))
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("%s did not say \"listening on\" within 60s:\n%s", name, tail(p.logs.String(), 40))
	}
	return p, nil
}

// kill9 kills the process with SIGKILL and waits for it: no shutdown, no cleanup.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.kill9()
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---- in-process servers ------------------------------------------------------------

// startInProcess serves the handler the server binary serves (service.New on
// service.Open's pools, as cmd/server wires it) on loopback, in this process, with opts
// (for hooks a process cannot take, such as Options.Downstream). It returns the base URL.
// Unlike the processes, it runs the committed handlers (the spec's lease and timeout).
func startInProcess(t *testing.T, databaseURL string, opts service.Options) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := service.Open(ctx, databaseURL, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	srv := httptest.NewServer(service.New(d.Pool, opts))
	t.Cleanup(srv.Close) // before d.Close: waits for the handlers
	return srv.URL
}

// downstreamGate is a service.Options.Downstream that holds every call (inside its
// owner's business transaction) until the test opens the gate. It does not follow the
// call's context: the operation's timeout does not end the hold, so how long the test
// takes to act on the held owners does not matter. The test's end (t.Context) does.
type downstreamGate struct {
	t       *testing.T
	ctx     context.Context
	arrived chan struct{} // one send per call, buffered
	opened  chan struct{}
	once    sync.Once
	calls   atomic.Int32
}

func newDownstreamGate(t *testing.T) *downstreamGate {
	return &downstreamGate{t: t, ctx: t.Context(), arrived: make(chan struct{}, 1024), opened: make(chan struct{})}
}

func (g *downstreamGate) call(context.Context) error {
	g.calls.Add(1)
	g.arrived <- struct{}{}
	select {
	case <-g.opened:
		return nil
	case <-g.ctx.Done():
		return errors.New("downstream call: the test ended with the gate closed")
	}
}

// waitArrived waits until n calls are held; after limit it fails the test (call it from
// the test's goroutine).
func (g *downstreamGate) waitArrived(n int, limit time.Duration) {
	g.t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for i := range n {
		select {
		case <-g.arrived:
		case <-timer.C:
			g.t.Fatalf("%d of %d downstream calls arrived within %v", i, n, limit)
		}
	}
}

// open lets the held calls (and every later one) return.
func (g *downstreamGate) open() { g.once.Do(func() { close(g.opened) }) }

// arrivals is the number of calls so far.
func (g *downstreamGate) arrivals() int { return int(g.calls.Load()) }

// lockedLines collects log lines (a service.Options.Logf) from concurrent handlers.
type lockedLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLines) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// count is the number of lines containing substr.
func (l *lockedLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

func (l *lockedLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// ---- HTTP --------------------------------------------------------------------------

var client = &http.Client{
	Timeout: 90 * time.Second,
	Transport: &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	},
}

type reply struct {
	status   int
	header   http.Header
	body     []byte
	err      error // transport error: no HTTP answer
	attempts int   // requests untilDone sent to get it
}

func (r reply) executed() bool {
	return r.err == nil && r.status/100 == 2 && r.header.Get("Idempotent-Replayed") != "true"
}

func (r reply) replayed() bool {
	return r.err == nil && r.status/100 == 2 && r.header.Get("Idempotent-Replayed") == "true"
}

func (r reply) String() string {
	if r.err != nil {
		return "transport error: " + r.err.Error()
	}
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

// paymentID is the id in a 201's body.
func (r reply) paymentID() string {
	var p struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(r.body, &p)
	return p.ID
}

func do(req *http.Request) reply {
	resp, err := client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{err: err}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func paymentBody(key string) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"EUR","description":"payment for %s"}`, 100+len(key), key)
}

// pay sends POST /payments for key (its body derived from the key).
func pay(ctx context.Context, base, account, key string) reply {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/payments", strings.NewReader(paymentBody(key)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Account-ID", account)
	req.Header["Idempotency-Key"] = []string{key}
	return do(req)
}

// tally counts answers by kind.
type tally struct {
	mu                                                         sync.Mutex
	requests, executed, replayed, conflicts, server, transport int
	other                                                      int
	firstOther                                                 string
}

func (t *tally) add(r reply) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests++
	switch {
	case r.err != nil:
		t.transport++
	case r.executed():
		t.executed++
	case r.replayed():
		t.replayed++
	case r.status == http.StatusConflict:
		t.conflicts++
	case r.status >= 500:
		t.server++
	default:
		t.other++
		if t.firstOther == "" {
			t.firstOther = r.String()
		}
	}
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%d requests: %d executed (201), %d replayed, %d answered 409, %d answered 5xx, %d transport errors, %d other",
		t.requests, t.executed, t.replayed, t.conflicts, t.server, t.transport, t.other)
}

// untilDone sends pay for key to the servers in turn until it gets a 2xx (retrying 409,
// 5xx and transport errors after a short client backoff), and returns that answer. It
// gives up after limit.
func untilDone(base []string, account, key string, tl *tally, limit time.Duration) (reply, error) {
	deadline := time.Now().Add(limit)
	for i := 0; ; i++ {
		r := pay(context.Background(), base[i%len(base)], account, key)
		r.attempts = i + 1
		tl.add(r)
		switch {
		case r.err == nil && r.status/100 == 2:
			return r, nil
		case r.err == nil && r.status != http.StatusConflict && r.status < 500:
			return r, fmt.Errorf("key %s: unexpected answer %s", key, r)
		case time.Now().After(deadline):
			return r, fmt.Errorf("key %s: no 2xx within %v; last answer %s", key, limit, r)
		}
		time.Sleep(10 * time.Millisecond) // client backoff, not ordering
	}
}

// release starts n goroutines that each run f(i) once all of them are ready (a barrier),
// and waits for them.
func release(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// ---- database checks ---------------------------------------------------------------

type db struct {
	t    *testing.T
	pool *pgxpool.Pool
}

func openDB(t *testing.T, url string) *db {
	t.Helper()
	return &db{t: t, pool: pgtest.PoolWithMax(t, url, 4)}
}

func (d *db) int(sql string, args ...any) int {
	d.t.Helper()
	var n int
	if err := d.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		d.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// waitFor polls a condition in the database until it holds: waiting on the database clock
// (a lease running out) or on the servers reaching a state, never ordering by sleeping.
func (d *db) waitFor(cond string, limit time.Duration, args ...any) {
	d.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var ok bool
		err := d.pool.QueryRow(context.Background(), "SELECT "+cond, args...).Scan(&ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("timed out after %v waiting for %s (last error: %v)", limit, cond, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownersInBusiness selects, in pg_stat_activity, the backends of owners inside their
// business transactions, waiting on their simulated downstream call: idle in transaction
// after inserting their payment.
const ownersInBusiness = `FROM pg_stat_activity WHERE datname = current_database()
	AND state = 'idle in transaction' AND query LIKE '%InsertPayment%'`

// claimsHeld selects, in pg_locks, the claims held now: the transaction-scoped two-key
// advisory locks of the test's database.
const claimsHeld = `FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// inBusiness is the condition "n business transactions are open".
func inBusiness(n int) string {
	return fmt.Sprintf("count(*) = %d %s", n, ownersInBusiness)
}

// exactlyOnce checks the database after a run: every key in keys has exactly one payment
// and a completed idempotency key; no payment exists without a completed key; no
// key is left processing, no claim held.
func (d *db) exactlyOnce(keys []string) (duplicates int) {
	d.t.Helper()
	duplicates = d.int(`SELECT count(*) FROM (SELECT 1 FROM payments GROUP BY idempotency_scope, idempotency_key HAVING count(*) > 1) s`)
	if duplicates != 0 {
		d.t.Errorf("DUPLICATES: %d keys have more than one payment", duplicates)
	}
	if n := d.int(`SELECT count(*) FROM payments WHERE idempotency_key = ANY($1)`, keys); n != len(keys) {
		d.t.Errorf("%d payments for %d keys, want one each", n, len(keys))
	}
	if n := d.int(`SELECT count(*) FROM idempotency_keys WHERE key = ANY($1) AND status = 'completed' AND response_status = 201`, keys); n != len(keys) {
		d.t.Errorf("%d completed keys of %d", n, len(keys))
	}
	if n := d.int(`SELECT count(*) FROM payments p WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k
		WHERE k.scope = p.idempotency_scope AND k.key = p.idempotency_key AND k.status = 'completed')`); n != 0 {
		d.t.Errorf("%d payments without a completed key", n)
	}
	if n := d.int(`SELECT count(*) FROM idempotency_keys WHERE status = 'processing'`); n != 0 {
		d.t.Errorf("%d keys left processing", n)
	}
	if n := d.int(`SELECT count(*) ` + claimsHeld); n != 0 {
		d.t.Errorf("%d claims still held after the run", n)
	}
	return duplicates
}

// committed checks that a 2xx answer's payment exists, for its key: no 2xx without a
// committed row.
func (d *db) committed(key string, r reply) bool {
	d.t.Helper()
	id := r.paymentID()
	if id == "" {
		d.t.Errorf("key %s: 2xx without a payment id: %s", key, r)
		return false
	}
	if d.int(`SELECT count(*) FROM payments WHERE id = $1 AND idempotency_key = $2`, id, key) != 1 {
		d.t.Errorf("LOST: key %s was answered %d with payment %s, which is not in the database", key, r.status, id)
		return false
	}
	return true
}
