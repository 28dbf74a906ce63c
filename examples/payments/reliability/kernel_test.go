package reliability

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/pgembed"
)

// netnsEnv marks the test binary re-run inside a network namespace of its own.
const netnsEnv = "IDEMGEN_RELIABILITY_NETNS"

// blackholeAddr is the address PostgreSQL is reached at inside the namespace; a blackhole
// route for it (ahead of the local table) drops, in the kernel, every packet the service
// sends to it: no ACK, no RST, no ICMP.
const blackholeAddr = "127.0.0.2"

// userTimeout is the TCP user timeout the server's pool has
// (idem.ConfigureConnections(cfg, idem.DefaultTCPUserTimeout) in service.Open).
const userTimeout = 10 * time.Second

// A blackhole in the kernel, not in a proxy that keeps acknowledging: packets to the
// database are dropped, so the sockets' unacknowledged data is what ends a request, at
// TCP_USER_TIMEOUT. The server runs with -unmarked-timeout 60s, so that a GET whose
// statement is blackholed has no bound of idem's or of its own before that: it must end
// by the user timeout (10 s) that idem.ConfigureConnections sets (the server logs the
// kernel's ETIMEDOUT, "connection timed out"), not after the operating system's
// retransmissions (about 15 minutes, and the GET's 60 s bound before that: what it waits
// with the user timeout disabled). The bound asserted is loose, 30 s: a bare Go socket
// with the same options (TCP_USER_TIMEOUT 10 s, the same keepalive) gets ETIMEDOUT after
// 10.2 s here, but the server's pgx connection consistently after 23.6 s, one error, one
// connection (-max-conns 1); why is not known yet. Once the route is gone the service
// serves again (a new connection) and a payment executes once.
//
// The test re-runs itself (the test binary) inside a network namespace of its own
// (unshare -n; loopback brought up in it), so that the routes it changes are nobody
// else's; without unshare or the rights to it, it is skipped and says why.
func TestKernelBlackhole(t *testing.T) {
	if os.Getenv(netnsEnv) != "1" {
		if reason := netnsUnavailable(); reason != "" {
			t.Skip(reason)
		}
		out, err := runInNetns(t.Name())
		t.Logf("inside the network namespace:\n%s", out)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	// Inside the namespace: table 100, looked up before the local table for blackholeAddr,
	// holds the blackhole route while the fault lasts.
	for _, cmd := range []string{
		"ip rule add pref 10 to " + blackholeAddr + " lookup 100",
		"ip rule del pref 0",
		"ip rule add pref 20 lookup local",
	} {
		ipCmd(t, cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgembed.Start(ctx, pgembed.Options{Settings: map[string]string{"listen_addresses": "127.0.0.1," + blackholeAddr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	u, err := url.Parse(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = strings.Replace(u.Host, "127.0.0.1", blackholeAddr, 1)
	srv := startPayments(t, "replica", u.String(), "-max-conns", "1", "-unmarked-timeout", "60s")
	d := openDB(t, c.URL()) // the checks' own connections: 127.0.0.1, never blackholed
	const account = "acct-kernel"
	var tl tally
	probe := pay(context.Background(), srv.url, account, "probe")
	tl.add(probe)
	if !probe.executed() {
		t.Fatalf("the service does not work before any fault: %s", probe)
	}
	if g := getPayment(srv.url, account, probe.paymentID(), 20*time.Second); g.status != http.StatusOK {
		t.Fatalf("GET before any fault: %s", g)
	}

	ipCmd(t, "ip route add blackhole "+blackholeAddr+" table 100")
	start := time.Now()
	during := getPayment(srv.url, account, probe.paymentID(), 70*time.Second)
	took := time.Since(start)
	ipCmd(t, "ip route del blackhole "+blackholeAddr+" table 100")
	if during.err != nil || during.status < 500 {
		t.Errorf("a GET whose statement the kernel drops: %s after %v; want a 5xx", during, took.Round(time.Millisecond))
	}
	// Ended by the kernel (the log's ETIMEDOUT), well before the GET's own 60 s bound; see
	// above for why the bound is 30 s and not the user timeout.
	if bound := 30 * time.Second; took < userTimeout || took > bound {
		t.Errorf("a GET whose statement the kernel drops answered after %v; want between the TCP user timeout %v and %v, before its own 60 s bound", took.Round(time.Millisecond), userTimeout, bound)
	}
	// The server logs the error as it answers: its log line may reach the pipe the test
	// reads a moment after the answer, so wait for it (bounded).
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(srv.logs.String(), "connection timed out") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(srv.logs.String(), "connection timed out") {
		t.Errorf("the server's log does not show the kernel's ETIMEDOUT (connection timed out):\n%s", tail(srv.logs.String(), 20))
	}

	after := getPayment(srv.url, account, probe.paymentID(), 20*time.Second)
	if after.status != http.StatusOK {
		t.Errorf("a GET once the route is gone: %s, want 200", after)
	}
	r, err := untilDone([]string{srv.url}, account, "after", &tl, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	if !d.committed("after", r) {
		lost++
	}
	duplicates := d.exactlyOnce([]string{"probe", "after"})
	result(t, &tl, 2, duplicates, lost, "; the blackholed GET answered "+answerKind(during)+" after "+took.Round(time.Millisecond).String()+
		" (TCP user timeout "+userTimeout.String()+", its own bound 60s)")
}

// netnsUnavailable says why no network namespace can be made here ("" when one can).
func netnsUnavailable() string {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return "no unshare (util-linux): " + err.Error()
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip (iproute2): " + err.Error()
	}
	if out, err := exec.Command(unshare, "-n", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Sprintf("cannot make a network namespace here (unshare -n: %v %s)", err, out)
	}
	return ""
}

// inNetns reports whether this test binary runs in the network namespace runInNetns made.
func inNetns() bool { return os.Getenv(netnsEnv) == "1" }

// runInNetns runs the test named test again, in this test binary, in a new network
// namespace (unshare -n, the loopback brought up), with args added (flags of its own),
// and returns its output; the error says it failed.
func runInNetns(test string, args ...string) (string, error) {
	all := []string{"-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, os.Args[0], "-test.run", "^" + test + "$", "-test.count", "1"}
	if testing.Verbose() {
		all = append(all, "-test.v")
	}
	if testing.Short() {
		all = append(all, "-test.short")
	}
	cmd := exec.Command("unshare", append(all, args...)...)
	// Its own throwaway cluster: a DATABASE_URL server is out of the namespace's reach.
	cmd.Env = []string{netnsEnv + "=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err == nil && !strings.Contains(string(out), "PASS") {
		err = errors.New("no PASS")
	}
	if err != nil {
		return string(out), fmt.Errorf("%s in its network namespace: %w", test, err)
	}
	return string(out), nil
}

func ipCmd(t *testing.T, cmd string) {
	t.Helper()
	if err := ipErr(cmd); err != nil {
		t.Fatal(err)
	}
}

// ipErr runs an ip command (its words separated by blanks).
func ipErr(cmd string) error {
	f := strings.Fields(cmd)
	if out, err := exec.Command(f[0], f[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v %s", cmd, err, out)
	}
	return nil
}
