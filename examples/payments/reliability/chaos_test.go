package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/idem/idemredis/redistest"
	"github.com/idemgen/idemgen/internal/pgembed"
)

var (
	chaosSeed     = flag.Uint64("chaos.seed", 0, "TestChaos: the seed of the fault schedule (0: a random one, printed)")
	chaosDuration = flag.Duration("chaos.duration", 0, "TestChaos: how long faults are injected (0: 20s, 8s under -short)")
	chaosKinds    = flag.String("chaos.kinds", "", "TestChaos: draw faults of these kinds only (comma-separated; empty: all)")
)

// TestChaos runs the payments service as 3 replicas on one PostgreSQL under a seeded
// schedule of overlapping random faults, while clients make payments through the
// generated client (one key per logical call, every retry with the same key), records
// every attempt, heals everything, settles the calls that got no 2xx, and judges the
// history with the final database (checkChaos). -chaos.seed replays a schedule (the
// workload's interleaving is the machine's); the seed is printed first, and the last
// line is the run's figures:
//
//	chaos: seed=S faults=N kinds=K calls=C payments=P downstream=D duplicates=X lost=Y stuck=Z
//
// CHAOS_DEBUG=1 logs the replicas' last log lines before the checks.
func TestChaos(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	dur := *chaosDuration
	if dur == 0 {
		dur = 20 * time.Second
		if testing.Short() {
			dur = 8 * time.Second
		}
	}
	// Kernel-level blackholes need routes of the test's own: the run moves into a network
	// namespace of its own when it can (TestKernelBlackhole's way), and says so.
	kernel := inNetns()
	if !kernel {
		if reason := netnsUnavailable(); reason != "" {
			fmt.Printf("chaos: no kernel-level blackholes: %s\n", reason)
		} else {
			out, err := runInNetns(t.Name(), fmt.Sprintf("-chaos.seed=%d", seed), "-chaos.duration="+dur.String(), "-chaos.kinds="+*chaosKinds)
			fmt.Print(out) // the run's output, its last line the run's figures
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	fmt.Printf("chaos: seed=%d duration=%v (replay with -chaos.seed=%d -chaos.duration=%v)\n", seed, dur, seed, dur)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// The Redis store's operation (starPayment) runs on a Redis of its own when the
	// machine has a redis-server (CI installs it); without one the schedule has no Redis
	// faults, and says so.
	_, noRedis := redistest.Binary()
	if noRedis != nil && os.Getenv("CI") == "true" {
		t.Fatal(noRedis)
	}
	schedule := newSchedule(rng, dur, chaosReplicas, noRedis == nil, kernel)
	for _, f := range schedule {
		t.Logf("fault %2d at %6.2fs for %5.2fs: %s", f.n, f.at.Seconds(), f.dur.Seconds(), f)
	}

	zerolog.SetGlobalLevel(zerolog.WarnLevel) // toxiproxy's toxics log their interruptions at trace level
	if kernel {
		// Replica i reaches its database link at 127.0.0.(10+i); table 100, looked up
		// before the local table for 127.0.0.8/29, holds a blackhole route for it while a
		// kernel-blackhole fault lasts.
		for _, cmd := range []string{"ip rule add pref 10 to 127.0.0.8/29 lookup 100", "ip rule del pref 0", "ip rule add pref 20 lookup local"} {
			ipCmd(t, cmd)
		}
	}
	bin, _ := servers(t)
	c := restartableCluster(t)
	var rs *redistest.Server
	if noRedis == nil {
		rs = redistest.Start(t)
	} else {
		t.Logf("no redis-server (%v): no starPayment calls, no Redis faults", noRedis)
	}
	prov := startProvider(t, c)
	pu, _ := url.Parse(prov.url)
	h := newChaosHarness(t, c, rs, bin, pu.Host, kernel)
	probe := h.call(context.Background(), 0)
	if probe.status != http.StatusCreated {
		t.Fatalf("the service does not work before any fault: %+v", probe)
	}

	// The workload: workers making logical calls until the faults end.
	start := time.Now()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range chaosWorkers {
		wg.Go(func() {
			for !stop.Load() {
				if c := h.call(context.Background(), -1); rs != nil && c.status == http.StatusCreated && c.n%3 == 0 {
					h.star(context.Background(), c)
				}
			}
		})
	}
	// The faults, each in its goroutine: applied at its time, healed after its duration.
	var fw sync.WaitGroup
	for _, f := range schedule {
		fw.Go(func() {
			time.Sleep(time.Until(start.Add(f.at))) // the schedule's clock, not an ordering of the checks
			h.apply(f)
		})
	}
	fw.Wait()
	time.Sleep(time.Until(start.Add(dur))) // the workload runs for the whole duration
	stop.Store(true)
	// Every fault has healed itself; healAll makes sure of it (no toxic left, every
	// process up).
	if err := h.healAll(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	wg.Wait()
	h.burstWG.Wait()

	// Settle: every call without a 2xx is retried, with its key, until it gets one.
	settleStart := time.Now()
	unsettled := h.settle(60 * time.Second)
	settleTook := time.Since(settleStart)

	if os.Getenv("CHAOS_DEBUG") != "" {
		for _, p := range h.replicas {
			t.Logf("--- %s:\n%s", p.name, tail(p.logs.String(), 60))
		}
	}
	db := readChaosDB(t, c.URL(), chaosAccount)
	db.stars = readStars(t, c.URL())
	db.charges = readCharges(t, c.DatabaseURL(providerDB))
	v := checkChaos(h.history(), db, healed)
	for _, p := range v.problems {
		t.Error(p)
	}
	if unsettled > 0 {
		t.Errorf("%d calls got no 2xx within 60s of settling after the faults healed", unsettled)
	}
	kinds := map[string]bool{}
	for _, f := range schedule {
		kinds[f.kind] = true
	}
	hist := h.history()
	starred := 0
	for _, st := range hist.stars {
		if st.status/100 == 2 {
			starred++
		}
	}
	t.Logf("%d payment calls, %d attempts in all (payments: %s); %d starPayment calls (Redis store), %d answered 2xx; "+
		"the provider replayed %d charges (a payment run again after its charge, or a charge's answer lost); faults healed %v after the start, settling took %v",
		v.calls, v.attempts, v.answers, len(hist.stars), starred, strings.Count(prov.logs.String(), "replayed a charge"),
		healed.Sub(start).Round(time.Millisecond), settleTook.Round(time.Millisecond))
	// downstream: the charges the provider holds (one per payment, or the checker says
	// which are not).
	fmt.Printf("chaos: seed=%d faults=%d kinds=%d calls=%d payments=%d downstream=%d duplicates=%d lost=%d stuck=%d\n",
		seed, len(schedule), len(kinds), v.calls, v.payments, v.downstream, v.duplicates, v.lost, v.stuck)
}

const (
	chaosReplicas = 3
	chaosWorkers  = 6
	chaosAccount  = "acct-chaos"
	chaosMaxConns = 4 // per replica: pool exhaustion is reachable
	// burstCalls is the size of a pool-exhaustion fault's burst on one replica.
	burstCalls = 16
)

// ---- the schedule ---------------------------------------------------------------------

// fault is one entry of a schedule.
type fault struct {
	n        int
	at, dur  time.Duration
	kind     string
	replica  int    // the replica it concerns (replica kills, links, pool exhaustion)
	link     string // "client" (client↔replica) or "db" (replica↔PostgreSQL), for link faults
	latency  int    // ms, for latency
	rate     int    // KB/s, for bandwidth
	toxicity float32
}

func (f fault) String() string {
	switch f.kind {
	case "latency":
		return fmt.Sprintf("latency %dms on the %s link of replica %d", f.latency, f.link, f.replica)
	case "bandwidth":
		return fmt.Sprintf("bandwidth %d KB/s on the %s link of replica %d", f.rate, f.link, f.replica)
	case "reset":
		return fmt.Sprintf("resets (%.0f%% of the connections) on the %s link of replica %d", f.toxicity*100, f.link, f.replica)
	case "blackhole":
		return fmt.Sprintf("blackhole (userspace, nothing closed) on the %s link of replica %d", f.link, f.replica)
	case "replica-kill":
		return fmt.Sprintf("kill -9 of replica %d, restarted after the fault", f.replica)
	case "pool-exhaustion":
		return fmt.Sprintf("pool exhaustion on replica %d (1s latency each way to PostgreSQL and a burst of %d calls)", f.replica, burstCalls)
	case "redis-kill":
		return "kill -9 of Redis (restarted empty after the fault)"
	case "kernel-blackhole":
		return fmt.Sprintf("kernel-level blackhole (a blackhole route: no ACK, no RST) between replica %d and its database link", f.replica)
	}
	return f.kind // pg-restart, pg-crash
}

var faultKinds = []string{"replica-kill", "pg-restart", "pg-crash", "latency", "reset", "blackhole", "bandwidth", "pool-exhaustion"}

// newSchedule draws about one fault per 1.5 s of dur, overlapping: the first ones cycle
// through every kind (in a drawn order), the rest are drawn at random.
func newSchedule(rng *rand.Rand, dur time.Duration, replicas int, redis, kernel bool) []fault {
	n := max(int(dur/(1500*time.Millisecond)), 4)
	kinds := append([]string(nil), faultKinds...)
	links := []string{"client", "db", "provider"}
	if redis {
		kinds = append(kinds, "redis-kill")
		links = append(links, "redis")
	}
	if kernel {
		kinds = append(kinds, "kernel-blackhole")
	}
	if *chaosKinds != "" {
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return !slices.Contains(strings.Split(*chaosKinds, ","), k) })
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var out []fault
	for i := range n {
		kind := kinds[rng.IntN(len(kinds))]
		if i < len(kinds) {
			kind = kinds[i]
		}
		f := fault{
			kind:    kind,
			at:      time.Duration(rng.Int64N(int64(dur * 95 / 100))),
			dur:     500*time.Millisecond + time.Duration(rng.Int64N(int64(4500*time.Millisecond))),
			replica: rng.IntN(replicas),
			link:    links[rng.IntN(len(links))],
		}
		switch kind {
		case "latency":
			f.latency = 50 + rng.IntN(750)
		case "bandwidth":
			f.rate = 1 + rng.IntN(16)
		case "reset":
			f.toxicity = 0.1 + 0.4*rng.Float32()
		case "pool-exhaustion":
			// Long enough for the burst's later calls to wait out the acquire timeout (5s)
			// behind the first ones (each about 6s: three round trips of 2s).
			f.dur = max(f.dur, 7*time.Second)
		case "kernel-blackhole":
			// Past the TCP user timeout (10 s) and the keepalive's reach now and then.
			f.dur = 6*time.Second + time.Duration(rng.Int64N(int64(8*time.Second)))
		case "pg-crash", "pg-restart":
			f.dur = 200*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
		}
		if f.at+f.dur > dur {
			f.dur = max(dur-f.at, 200*time.Millisecond)
		}
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	for i := range out {
		out[i].n = i + 1
	}
	return out
}

// ---- the harness ----------------------------------------------------------------------

// chaosHarness is the system under test and its history.
type chaosHarness struct {
	t       *testing.T
	cluster *pgembed.Cluster
	bin     string

	mu       sync.Mutex
	replicas []*proc
	addrs    []string // the replicas' host:port, kept across restarts
	killed   []bool
	client   []*toxiproxy.Proxy // client ↔ replica
	db       []*toxiproxy.Proxy // replica ↔ PostgreSQL
	dbURLs   []string
	plink    []*toxiproxy.Proxy // replica ↔ provider
	redis    *redistest.Server
	redisMu  sync.Mutex
	rlink    []*toxiproxy.Proxy // replica ↔ Redis (nil without Redis)
	pgMu     sync.Mutex         // PostgreSQL faults one at a time
	kernelMu sync.Mutex
	holes    []int // kernel blackholes in force per replica (the route is there while > 0)
	burstWG  sync.WaitGroup

	calls    []*chaosCall
	stars    []chaosStar
	attempts []chaosAttempt
	nextCall atomic.Int64
	retry    *idemclient.Client
	doer     *chaosDoer
}

// chaosCall is one logical call: one key, its request, the client's final answer.
type chaosCall struct {
	n           int
	key         string
	amount      int64
	description string
	status      int // the client's final status (0: none)
	paymentID   string
	err         error
}

// chaosAttempt is one HTTP attempt as the client saw it.
type chaosAttempt struct {
	key        string
	replica    int
	start, end time.Time
	status     int // 0: transport error
	replayed   bool
	body       []byte
	err        string
}

func newChaosHarness(t *testing.T, c *pgembed.Cluster, rs *redistest.Server, bin, providerAddr string, kernel bool) *chaosHarness {
	h := &chaosHarness{t: t, cluster: c, redis: rs, bin: bin, killed: make([]bool, chaosReplicas), holes: make([]int, chaosReplicas)}
	for i := range chaosReplicas {
		h.plink = append(h.plink, linkProxy(t, fmt.Sprintf("provider-%d", i), providerAddr))
		host := "127.0.0.1"
		if kernel {
			host = replicaDBHost(i)
		}
		fp := newFaultProxyOn(t, c.URL(), host)
		h.db = append(h.db, fp.proxy)
		h.dbURLs = append(h.dbURLs, fp.url)
		if rs != nil {
			h.rlink = append(h.rlink, linkProxy(t, fmt.Sprintf("redis-%d", i), rs.Addr()))
		}
		p, err := h.startReplica(i, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h.replicas = append(h.replicas, p)
		u, _ := url.Parse(p.url)
		h.addrs = append(h.addrs, u.Host)
		h.client = append(h.client, linkProxy(t, fmt.Sprintf("client-%d", i), u.Host))
	}
	h.doer = &chaosDoer{h: h, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 5 * time.Second}}}
	h.retry = &idemclient.Client{
		Doer: h.doer, MaxAttempts: 10, BaseDelay: 20 * time.Millisecond, MaxDelay: 500 * time.Millisecond,
		MaxRetryAfter: 2 * time.Second,
		// Past the server's longest request (requestBound): an attempt that takes longer
		// is one the checker flags, not one the client cuts.
		AttemptTimeout: requestBound + 4*time.Second,
	}
	return h
}

// replicaDBHost is the loopback address replica i reaches its database link at, in a
// run with kernel-level blackholes.
func replicaDBHost(i int) string { return fmt.Sprintf("127.0.0.%d", 10+i) }

// linkProxy starts a toxiproxy proxy (as a library) on a free loopback port in front of
// upstream (host:port), stopped when t ends.
func linkProxy(t *testing.T, name, upstream string) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func (h *chaosHarness) startReplica(i int, addr string) (*proc, error) {
	env := []string{"DATABASE_URL=" + h.dbURLs[i], "REDIS_ADDR="}
	if h.redis != nil {
		env[1] += h.rlink[i].Listen
	}
	// -delay: the business goes on for a while after the provider's charge, before the
	// COMMIT, so that a replica killed (or a link cut) there is likely.
	return startProcEnv(h.t, fmt.Sprintf("replica-%d", i), h.bin, env,
		"-shutdown-timeout", "2s", "-max-conns", fmt.Sprint(chaosMaxConns), "-delay", "100ms", "-addr", addr,
		"-provider-url", "http://"+h.plink[i].Listen)
}

// providerDB is the provider stand-in's database, on the cluster of the payments.
const providerDB = "provider"

// startProvider creates the provider's database and starts the stand-in on it.
func startProvider(t *testing.T, c *pgembed.Cluster) *proc {
	t.Helper()
	d := openDB(t, c.URL())
	if _, err := d.pool.Exec(context.Background(), "CREATE DATABASE "+providerDB); err != nil {
		t.Fatal(err)
	}
	return startProc(t, "provider", providerServer(t), c.DatabaseURL(providerDB))
}

// readCharges reads the provider's charges: reference (the payment's key) → count.
func readCharges(t *testing.T, databaseURL string) map[string]int {
	t.Helper()
	d := openDB(t, databaseURL)
	rows, err := d.pool.Query(context.Background(), `SELECT reference, count(*) FROM provider_charges GROUP BY reference`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var ref string
		var n int
		if err := rows.Scan(&ref, &n); err != nil {
			t.Fatal(err)
		}
		out[ref] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// chaosStar is one starPayment call (the Redis store): its key and final status.
type chaosStar struct {
	key, paymentID string
	status         int
}

// star stars c's payment once, as one logical call with a key of its own.
func (h *chaosHarness) star(ctx context.Context, c *chaosCall) {
	h.mu.Lock()
	id := c.paymentID
	h.mu.Unlock()
	client, err := api.NewIdempotentClient("http://any", h.retry, api.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
		req.Header.Set(service.AccountHeader, chaosAccount)
		return nil
	}))
	if err != nil {
		h.t.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*requestBound)
	defer cancel()
	st := chaosStar{key: fmt.Sprintf("star-%06d", c.n), paymentID: id}
	resp, _, _ := client.StarPayment(ctx, id, nil, idemclient.WithKey(st.key))
	if resp != nil {
		st.status = resp.StatusCode()
	}
	h.mu.Lock()
	h.stars = append(h.stars, st)
	h.mu.Unlock()
}

// call makes one logical call through the generated client (replica -1: any, per
// attempt) and records it.
func (h *chaosHarness) call(ctx context.Context, replica int) *chaosCall {
	n := int(h.nextCall.Add(1))
	c := &chaosCall{n: n, key: fmt.Sprintf("chaos-%06d", n), amount: int64(100 + n), description: fmt.Sprintf("chaos call %d", n)}
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	if n%4 != 0 {
		h.send(ctx, c, replica, h.retry)
		return c
	}
	// Every fourth call is sent twice at once with its key (a client that double-submits,
	// or two retries in flight): one executes, the other gets 409 or the replay.
	release(2, func(int) { h.send(ctx, c, replica, h.retry) })
	return c
}

// send runs c's request as one logical call of retry (its key: c.key).
func (h *chaosHarness) send(ctx context.Context, c *chaosCall, replica int, retry *idemclient.Client) {
	base := "http://any"
	if replica >= 0 {
		base = fmt.Sprintf("http://replica-%d", replica)
	}
	client, err := api.NewIdempotentClient(base, retry, api.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
		req.Header.Set(service.AccountHeader, chaosAccount)
		return nil
	}))
	if err != nil {
		h.t.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*requestBound)
	defer cancel()
	desc := c.description
	resp, _, err := client.CreatePayment(ctx, nil, api.CreatePaymentJSONRequestBody{Amount: c.amount, Currency: "EUR", Description: &desc}, idemclient.WithKey(c.key))
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.status/100 == 2 {
		return // the call's other sender got its 2xx
	}
	c.err = err
	c.status = 0
	if resp != nil {
		c.status = resp.StatusCode()
		if resp.JSON201 != nil {
			c.paymentID = resp.JSON201.Id
		}
	}
}

// chaosDoer sends each attempt to a replica's client link (the one its URL names, or one
// drawn at random) and records it.
type chaosDoer struct {
	h  *chaosHarness
	hc *http.Client
}

func (d *chaosDoer) Do(req *http.Request) (*http.Response, error) {
	replica := rand.IntN(chaosReplicas)
	if _, err := fmt.Sscanf(req.URL.Host, "replica-%d", &replica); err != nil {
		replica = rand.IntN(chaosReplicas)
	}
	req.URL.Host = d.h.client[replica].Listen
	req.Host = ""
	a := chaosAttempt{key: req.Header.Get("Idempotency-Key"), replica: replica, start: time.Now()}
	resp, err := d.hc.Do(req)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			resp.Body = io.NopCloser(bytes.NewReader(b))
			a.status, a.body = resp.StatusCode, b
			a.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
		}
	}
	a.end = time.Now()
	if err != nil {
		a.err = err.Error()
	}
	d.h.mu.Lock()
	d.h.attempts = append(d.h.attempts, a)
	d.h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// apply injects f and heals it after f.dur.
func (h *chaosHarness) apply(f fault) {
	name := fmt.Sprintf("fault-%d", f.n)
	link := h.db[f.replica]
	switch f.link {
	case "client":
		link = h.client[f.replica]
	case "redis":
		link = h.rlink[f.replica]
	case "provider":
		link = h.plink[f.replica]
	}
	// toxic adds a toxic (its name, then the rest of toxiproxy's JSON) and returns its removal.
	toxic := func(p *toxiproxy.Proxy, toxicName, rest string) func() {
		js := fmt.Sprintf(`{"name":%q,%s}`, toxicName, rest)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			h.t.Errorf("fault %d: %s: %v", f.n, js, err)
			return func() {}
		}
		return func() { _ = p.Toxics.RemoveToxic(context.Background(), toxicName) }
	}
	var heal []func()
	switch f.kind {
	case "latency":
		for _, stream := range []string{"upstream", "downstream"} {
			heal = append(heal, toxic(link, name+"-"+stream, fmt.Sprintf(`"type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":%d}`, stream, f.latency, f.latency/4)))
		}
	case "bandwidth":
		heal = append(heal, toxic(link, name, fmt.Sprintf(`"type":"bandwidth","stream":"downstream","attributes":{"rate":%d}`, f.rate)))
	case "reset":
		heal = append(heal, toxic(link, name, fmt.Sprintf(`"type":"reset_peer","stream":"upstream","toxicity":%g,"attributes":{"timeout":0}`, f.toxicity)))
	case "blackhole":
		// toxiproxy's timeout toxic with timeout 0: nothing passes and nothing is closed
		// until it is removed (a userspace blackhole: the kernel still acknowledges).
		heal = append(heal, toxic(link, name, `"type":"timeout","stream":"upstream","attributes":{"timeout":0}`))
	case "replica-kill":
		h.mu.Lock()
		p := h.replicas[f.replica]
		already := h.killed[f.replica]
		h.killed[f.replica] = true
		h.mu.Unlock()
		if already {
			return // another fault has it down, and restarts it
		}
		p.kill9()
		heal = append(heal, func() {
			if err := h.restartReplica(f.replica); err != nil {
				h.t.Errorf("fault %d: %v", f.n, err)
			}
		})
	case "pg-restart":
		h.pgMu.Lock()
		defer h.pgMu.Unlock()
		if err := h.cluster.Restart(context.Background()); err != nil {
			h.t.Errorf("fault %d: PostgreSQL restart: %v", f.n, err)
		}
		return
	case "pg-crash":
		h.pgMu.Lock()
		if err := h.cluster.Kill(); err != nil {
			h.t.Errorf("fault %d: PostgreSQL crash: %v", f.n, err)
		}
		heal = append(heal, func() {
			defer h.pgMu.Unlock()
			if err := h.cluster.StartAgain(context.Background()); err != nil {
				h.t.Errorf("fault %d: PostgreSQL start after the crash: %v", f.n, err)
			}
		})
	case "redis-kill":
		h.redisMu.Lock()
		h.redis.Kill()
		heal = append(heal, func() {
			defer h.redisMu.Unlock()
			defer func() {
				if v := recover(); v != nil {
					h.t.Errorf("fault %d: Redis restart: %v", f.n, v)
				}
			}()
			h.redis.Restart()
		})
	case "kernel-blackhole":
		route := "ip route add blackhole " + replicaDBHost(f.replica) + " table 100"
		h.kernelMu.Lock()
		if h.holes[f.replica]++; h.holes[f.replica] == 1 {
			if err := ipErr(route); err != nil {
				h.t.Errorf("fault %d: %v", f.n, err)
			}
		}
		h.kernelMu.Unlock()
		heal = append(heal, func() {
			h.kernelMu.Lock()
			defer h.kernelMu.Unlock()
			if h.holes[f.replica]--; h.holes[f.replica] == 0 {
				if err := ipErr(strings.Replace(route, " add ", " del ", 1)); err != nil {
					h.t.Errorf("fault %d: %v", f.n, err)
				}
			}
		})
	case "pool-exhaustion":
		for _, stream := range []string{"upstream", "downstream"} {
			heal = append(heal, toxic(h.db[f.replica], name+"-"+stream, fmt.Sprintf(`"type":"latency","stream":%q,"attributes":{"latency":1000}`, stream)))
		}
		for range burstCalls {
			h.burstWG.Go(func() { h.call(context.Background(), f.replica) })
		}
	}
	time.Sleep(f.dur) // the fault's duration, on the schedule's clock
	for _, fn := range heal {
		fn()
	}
}

// restartReplica starts replica i again on its address.
func (h *chaosHarness) restartReplica(i int) error {
	var err error
	for range 100 { // up to 10s: a replica cannot start while Redis is down
		var p *proc
		if p, err = h.startReplica(i, h.addrs[i]); err == nil {
			h.mu.Lock()
			h.replicas[i], h.killed[i] = p, false
			h.mu.Unlock()
			return nil
		}
		time.Sleep(100 * time.Millisecond) // the port may still be held by the killed process
	}
	return fmt.Errorf("restart replica %d: %w", i, err)
}

// healAll makes sure nothing of the faults is left: no toxic, every replica up,
// PostgreSQL up.
func (h *chaosHarness) healAll() error {
	for _, p := range slices.Concat(h.client, h.db, h.rlink, h.plink) {
		p.Toxics.ResetToxics(context.Background())
	}
	h.pgMu.Lock()
	err := h.cluster.StartAgain(context.Background())
	h.pgMu.Unlock()
	if err != nil {
		return err
	}
	for i := range chaosReplicas {
		h.mu.Lock()
		down := h.killed[i]
		h.mu.Unlock()
		if down {
			if err := h.restartReplica(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// settle retries, with its key, every call that got no 2xx, until it gets one or limit
// passes; it returns the number left without one.
func (h *chaosHarness) settle(limit time.Duration) int {
	h.mu.Lock()
	var open []*chaosCall
	for _, c := range h.calls {
		if c.status/100 != 2 {
			open = append(open, c)
		}
	}
	h.mu.Unlock()
	retry := *h.retry
	retry.MaxAttempts = 1000
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range open {
		wg.Go(func() { h.send(ctx, c, -1, &retry) })
	}
	wg.Wait()
	left := 0
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range open {
		if c.status/100 != 2 {
			left++
		}
	}
	return left
}

// history is a copy of the calls and attempts.
func (h *chaosHarness) history() chaosHistory {
	h.mu.Lock()
	defer h.mu.Unlock()
	hist := chaosHistory{attempts: append([]chaosAttempt(nil), h.attempts...), stars: append([]chaosStar(nil), h.stars...)}
	for _, c := range h.calls {
		hist.calls = append(hist.calls, *c)
	}
	return hist
}

// ---- the database, after the run -------------------------------------------------------

type chaosPayment struct {
	id, key, description string
	amount               int64
}

type chaosKeyRow struct {
	status         string
	responseStatus int
	body           []byte
}

type chaosDB struct {
	payments []chaosPayment
	keys     map[string]chaosKeyRow
	stars    map[string]int64 // payment id → stars counted
	charges  map[string]int   // the provider's charges: reference (a payment's key) → count
}

func readStars(t *testing.T, databaseURL string) map[string]int64 {
	t.Helper()
	d := openDB(t, databaseURL)
	rows, err := d.pool.Query(context.Background(), `SELECT payment_id, stars FROM payment_stars`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readChaosDB(t *testing.T, databaseURL, account string) chaosDB {
	t.Helper()
	d := openDB(t, databaseURL)
	ctx := context.Background()
	out := chaosDB{keys: map[string]chaosKeyRow{}}
	rows, err := d.pool.Query(ctx, `SELECT id, idempotency_key, amount, coalesce(description, '') FROM payments WHERE idempotency_scope = $1`, account)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p chaosPayment
		if err := rows.Scan(&p.id, &p.key, &p.amount, &p.description); err != nil {
			t.Fatal(err)
		}
		out.payments = append(out.payments, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = d.pool.Query(ctx, `SELECT key, status, coalesce(response_status, 0), coalesce(response_body, ''::bytea)
		FROM idempotency_keys WHERE scope = $1 AND operation = 'createPayment'`, account)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var r chaosKeyRow
		if err := rows.Scan(&k, &r.status, &r.responseStatus, &r.body); err != nil {
			t.Fatal(err)
		}
		out.keys[k] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n := d.int(`SELECT count(*) ` + claimsHeld); n != 0 {
		t.Errorf("%d claims still held after the run", n)
	}
	return out
}

// ---- the checker ---------------------------------------------------------------------

type chaosHistory struct {
	calls    []chaosCall
	stars    []chaosStar
	attempts []chaosAttempt
}

// chaosVerdict is what checkChaos found; problems lists every violation.
type chaosVerdict struct {
	calls, attempts, payments, downstream int
	duplicates, lost, stuck, mismatched   int
	overdue                               int
	answers                               string
	problems                              []string
}

// stuckAfter is how long after the faults healed a key may still be answered 409: the
// idle bound PostgreSQL cuts a silent owner off at, plus the slack of a loaded machine.
const stuckAfter = idleBound + 5*time.Second

// checkChaos judges a run's history with the final database:
//   - at most once: no key has more than one payment; no payment or recorded key
//     belongs to no call (duplicates);
//   - exactly once once healed: every call has its payment and a completed key answered
//     201, carrying the call's own amount and description (lost otherwise);
//   - every 2xx attempt matches the committed row byte for byte (its status and body are
//     the stored response's, its payment the key's payment), so every replay equals it,
//     and no 2xx was answered for a request that rolled back (lost otherwise);
//   - no key is unusable past the faults' end: no 409 answered later than stuckAfter
//     after healed (stuck);
//   - no attempt answered later than requestBound (plus slack) after it was sent (overdue).
//
// Why not porcupine: each key is a write-once register (the first committed response is
// the only value it ever has), so a history of a key is linearizable exactly when every
// 2xx carries that one value and the database holds it: equality checks, no order to
// search for. Porcupine would find the same and need a model that hides the checks that
// are not linearizability (the rows behind the answers, deadlines, stuck keys).
func checkChaos(h chaosHistory, db chaosDB, healed time.Time) chaosVerdict {
	v := chaosVerdict{calls: len(h.calls), attempts: len(h.attempts), payments: len(db.payments)}
	// Each count is of keys: a key lost is one however many of its answers show it.
	var duplicates, lost, stuck, mismatched, overdue = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	bad := func(set map[string]bool, key, format string, args ...any) {
		set[key] = true
		if len(v.problems) < 50 {
			v.problems = append(v.problems, fmt.Sprintf(format, args...))
		}
	}
	calls := map[string]chaosCall{}
	for _, c := range h.calls {
		calls[c.key] = c
	}
	byKey := map[string][]chaosPayment{}
	for _, p := range db.payments {
		byKey[p.key] = append(byKey[p.key], p)
	}
	for key, ps := range byKey {
		if len(ps) > 1 {
			bad(duplicates, key, "DUPLICATE: key %s has %d payments", key, len(ps))
		}
		if _, ok := calls[key]; !ok {
			bad(duplicates, key, "payment %s under key %s, which no call sent", ps[0].id, key)
		}
	}
	for key := range db.keys {
		if _, ok := calls[key]; !ok {
			bad(duplicates, key, "recorded key %s, which no call sent", key)
		}
	}
	// The provider: one charge per payment (its retries charged under the same derived
	// key), none for anything else.
	for ref, n := range db.charges {
		v.downstream += n
		switch {
		case n > 1:
			bad(duplicates, ref, "DUPLICATE: the provider charged key %s's payment %d times", ref, n)
		case len(byKey[ref]) == 0:
			bad(duplicates, ref, "the provider holds a charge for %s, which has no payment", ref)
		}
	}
	for _, c := range h.calls {
		ps, row := byKey[c.key], db.keys[c.key]
		switch {
		case len(ps) == 0:
			bad(lost, c.key, "LOST: call %d (key %s) has no payment after healing (final answer %d, %v)", c.n, c.key, c.status, c.err)
		case row.status != "completed" || row.responseStatus != http.StatusCreated:
			bad(lost, c.key, "LOST: call %d (key %s) has a payment but its key is %q answered %d", c.n, c.key, row.status, row.responseStatus)
		case db.charges != nil && db.charges[c.key] == 0:
			bad(lost, c.key, "LOST: call %d (key %s) has a payment but the provider no charge for it", c.n, c.key)
		case ps[0].amount != c.amount || ps[0].description != c.description:
			bad(mismatched, c.key, "call %d (key %s): its payment is %d %q, the call sent %d %q", c.n, c.key, ps[0].amount, ps[0].description, c.amount, c.description)
		}
	}
	// The Redis store promises less (a lost completion runs the business again on a
	// retry) but never a success that did not happen: a payment has at least as many
	// stars as star keys answered 2xx.
	starred := map[string]map[string]bool{}
	for _, a := range h.attempts {
		if strings.HasPrefix(a.key, "star-") && a.status/100 == 2 {
			var answered struct {
				PaymentID string `json:"payment_id"`
			}
			_ = json.Unmarshal(a.body, &answered)
			if starred[answered.PaymentID] == nil {
				starred[answered.PaymentID] = map[string]bool{}
			}
			starred[answered.PaymentID][a.key] = true
		}
	}
	for id, keys := range starred {
		if int64(len(keys)) > db.stars[id] {
			bad(lost, id, "LOST: payment %s was starred (2xx) under %d keys but has %d stars", id, len(keys), db.stars[id])
		}
	}
	var executed, replayed, conflicts, unavailable, exhausted, failed, transport, other int
	for _, a := range h.attempts {
		if strings.HasPrefix(a.key, "star-") {
			if a.status != 0 && a.end.Sub(a.start) > requestBound+slack {
				bad(overdue, a.key, "OVERDUE: an attempt of key %s answered %d after %v, past the request bound %v", a.key, a.status, a.end.Sub(a.start).Round(time.Millisecond), requestBound)
			}
			continue
		}
		switch {
		case a.status == 0:
			transport++
		case a.status/100 == 2 && a.replayed:
			replayed++
		case a.status/100 == 2:
			executed++
		case a.status == http.StatusConflict:
			conflicts++
		case a.status == http.StatusServiceUnavailable:
			unavailable++
			if bytes.Contains(a.body, []byte("no database connection was free")) {
				exhausted++
			}
		case a.status >= 500:
			failed++
		default:
			other++
			bad(mismatched, a.key, "key %s: answer %d %s (neither 2xx, 409 nor 5xx)", a.key, a.status, a.body)
		}
		if a.status != 0 && a.end.Sub(a.start) > requestBound+slack {
			bad(overdue, a.key, "OVERDUE: an attempt of key %s answered %d after %v, past the request bound %v", a.key, a.status, a.end.Sub(a.start).Round(time.Millisecond), requestBound)
		}
		if a.status == http.StatusConflict && a.end.After(healed.Add(stuckAfter)) {
			bad(stuck, a.key, "STUCK: key %s answered 409 %v after the faults healed", a.key, a.end.Sub(healed).Round(time.Millisecond))
		}
		if a.status/100 != 2 {
			continue
		}
		row, ok := db.keys[a.key]
		ps := byKey[a.key]
		var answered struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(a.body, &answered)
		switch {
		case !ok || len(ps) == 0:
			bad(lost, a.key, "LOST: key %s was answered %d (payment %s) but nothing of it committed", a.key, a.status, answered.ID)
		case a.status != row.responseStatus || !bytes.Equal(a.body, row.body):
			bad(mismatched, a.key, "key %s: a 2xx (replayed %v) differs from the committed response: %d %q, stored %d %q", a.key, a.replayed, a.status, a.body, row.responseStatus, row.body)
		case answered.ID != ps[0].id:
			bad(lost, a.key, "LOST: key %s was answered with payment %s, the database has %s", a.key, answered.ID, ps[0].id)
		}
	}
	v.answers = fmt.Sprintf("%d executed, %d replayed, %d × 409, %d × 503 (%d of them pool exhausted), %d other 5xx, %d transport errors, %d other",
		executed, replayed, conflicts, unavailable, exhausted, failed, transport, other)
	v.duplicates, v.lost, v.stuck, v.mismatched, v.overdue = len(duplicates), len(lost), len(stuck), len(mismatched), len(overdue)
	return v
}
