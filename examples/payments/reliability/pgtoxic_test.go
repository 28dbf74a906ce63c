package reliability

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// pgCut is a toxiproxy toxic that understands the PostgreSQL wire protocol enough to cut
// a link on a given message. Upstream (client to server) it matches the SQL of the
// statement an Execute runs (Bind names the statement, whose Parse it saw earlier on the
// link); downstream it matches a CommandComplete's tag (e.g. "COMMIT"). On a match it
// blackholes the link in its direction (everything from then on is dropped, nothing is
// closed: no FIN, no RST), after forwarding the matching chunk when After is set, or
// closes the link when Close is set. It fires on at most Limit links (default 1), so that
// the other connections of the pool stay healthy.
type pgCut struct {
	Match   string `json:"match"`   // regexp on the statement's SQL (upstream) or the tag (downstream)
	Backend bool   `json:"backend"` // the stream carries server messages (downstream)
	After   bool   `json:"after"`   // forward the matching chunk, then blackhole
	Close   bool   `json:"close"`   // close the link instead of blackholing it
	Limit   int32  `json:"limit"`   // links to cut; 0 means 1
	// Arm names the switch (armed) that makes the toxic fire. The toxic is added before the
	// service connects, so that it sees every link from its first message (the statements'
	// Parse messages come once per connection); the test arms it when the fault is due.
	Arm string `json:"arm"`

	once  sync.Once
	re    *regexp.Regexp
	fired atomic.Int32 // links cut so far
}

// pgCutState is one link's parse state.
type pgCutState struct {
	buf     []byte
	started bool              // the untyped startup message has gone by (frontend)
	stmts   map[string]string // statement name → SQL, from Parse
	dead    bool              // blackholed
}

func (t *pgCut) NewState() any { return &pgCutState{stmts: map[string]string{}} }

func (t *pgCut) Pipe(stub *toxics.ToxicStub) {
	t.once.Do(func() { t.re = regexp.MustCompile(t.Match) })
	st, _ := stub.State.(*pgCutState)
	if st == nil {
		st = t.NewState().(*pgCutState)
	}
	limit := t.Limit
	if limit == 0 {
		limit = 1
	}
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if st.dead {
				continue // the blackhole
			}
			if st.matches(t, c.Data) && isArmed(t.Arm) && t.fired.Add(1) <= limit {
				if t.After {
					stub.Output <- c
				}
				if t.Close {
					stub.Close()
					return
				}
				st.dead = true
				continue
			}
			stub.Output <- c
		}
	}
}

// matches reads the complete messages of data (with what earlier chunks left) and
// reports whether one of them is the toxic's message.
func (st *pgCutState) matches(t *pgCut, data []byte) bool {
	st.buf = append(st.buf, data...)
	found := false
	for {
		if !t.Backend && !st.started {
			if len(st.buf) < 8 {
				return found
			}
			n := int(binary.BigEndian.Uint32(st.buf))
			if len(st.buf) < n {
				return found
			}
			if binary.BigEndian.Uint32(st.buf[4:]) != 80877103 { // not an SSLRequest
				st.started = true
			}
			st.buf = st.buf[n:]
			continue
		}
		if len(st.buf) < 5 {
			return found
		}
		n := 1 + int(binary.BigEndian.Uint32(st.buf[1:]))
		if len(st.buf) < n {
			return found
		}
		typ, body := st.buf[0], st.buf[5:n]
		fields := strings.Split(string(body), "\x00")
		switch {
		case t.Backend && typ == 'C' && len(fields) > 0:
			found = found || t.re.MatchString(fields[0])
		case !t.Backend && typ == 'P' && len(fields) > 1:
			st.stmts[fields[0]] = fields[1]
		case !t.Backend && typ == 'B' && len(fields) > 1:
			found = found || t.re.MatchString(st.stmts[fields[1]])
		}
		st.buf = st.buf[n:]
	}
}

func init() { toxics.Register("pgcut", new(pgCut)) }

// armed holds the pgcut toxics' switches by name.
var armed sync.Map

func isArmed(name string) bool {
	v, ok := armed.Load(name)
	return ok && v.(bool)
}

// arm turns the switch name on (until the test ends).
func arm(t *testing.T, name string) {
	armed.Store(name, true)
	t.Cleanup(func() { armed.Delete(name) })
}

// faultProxy is a toxiproxy proxy between the service and PostgreSQL.
type faultProxy struct {
	t     *testing.T
	proxy *toxiproxy.Proxy
	url   string // databaseURL through the proxy
}

// newFaultProxy starts a proxy in front of the server of databaseURL and returns it with
// the URL to give the service (sslmode=disable: the toxic reads the messages).
func newFaultProxy(t *testing.T, databaseURL string) *faultProxy {
	t.Helper()
	return newFaultProxyOn(t, databaseURL, "127.0.0.1")
}

// newFaultProxyOn is newFaultProxy listening on host (a loopback address).
func newFaultProxyOn(t *testing.T, databaseURL, host string) *faultProxy {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "postgres", net.JoinHostPort(host, "0"), u.Host)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if _, _, err := net.SplitHostPort(p.Listen); err != nil {
		t.Fatalf("proxy address %q: %v", p.Listen, err)
	}
	u.Host = p.Listen
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return &faultProxy{t: t, proxy: p, url: u.String()}
}

// add adds a toxic (toxiproxy's JSON: name, type, stream, attributes).
func (f *faultProxy) add(json string) {
	f.t.Helper()
	if _, err := f.proxy.Toxics.AddToxicJson(strings.NewReader(json)); err != nil {
		f.t.Fatalf("toxic %s: %v", json, err)
	}
}

// remove removes the toxic named name (links it blackholed stay dead).
func (f *faultProxy) remove(name string) {
	f.t.Helper()
	if err := f.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		f.t.Fatalf("remove toxic %s: %v", name, err)
	}
}

// cut is the JSON of a pgcut toxic named name, whose switch has the test's name.
func cut(t *testing.T, name, stream, match string, attrs ...string) string {
	extra := fmt.Sprintf(", %q: %q", "arm", t.Name())
	for _, a := range attrs {
		extra += ", " + a
	}
	return fmt.Sprintf(`{"name": %q, "type": "pgcut", "stream": %q, "attributes": {"match": %q%s}}`, name, stream, match, extra)
}
