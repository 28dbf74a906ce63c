package hammer

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/idem/idemclient"
)

// Defaults applied by [Run] to zero fields of [Config].
const (
	DefaultMethod      = http.MethodPost
	DefaultRequests    = 100
	DefaultConcurrency = 10
	DefaultKeys        = 1
	DefaultKeyHeader   = "Idempotency-Key"
	DefaultTimeout     = 30 * time.Second
	DefaultProgress    = time.Second
)

// ReplayedHeader marks a replayed response when its value is "true".
const ReplayedHeader = "Idempotent-Replayed"

// MaxBodyBytes is how much of each response body, in bytes, is kept for comparison. Longer
// bodies are still read to the end (up to MaxResponseBytes) and their full length is
// compared too.
const MaxBodyBytes = 4 << 20

// MaxResponseBytes bounds a response body: a longer one is a transport error.
const MaxResponseBytes = 64 << 20

// Key formats of Config.KeyFormat.
const (
	KeyFormatPrefix = "prefix" // key i is KeyPrefix+i ("hammer-1f2e3d4c-7")
	KeyFormatUUID   = "uuid"   // key i is a version 4 UUID derived from KeyPrefix and i
)

// Template placeholders replaced in URL, Body and Header values, per key.
const (
	KeyPlaceholder   = "{{key}}" // the idempotency key
	IndexPlaceholder = "{{i}}"   // the key's 0-based index, in decimal
)

// Config describes one run. Zero fields take the documented defaults; negative numbers
// are errors.
type Config struct {
	// URL is the endpoint (http or https). Required. May hold placeholders.
	URL string
	// Method is the HTTP method. Default POST.
	Method string
	// Header is sent with every request; values may hold placeholders. The idempotency
	// key header is set on top of it.
	Header http.Header
	// Body is sent with every request; may hold placeholders. Nil sends no body.
	Body []byte
	// Requests is the total number of requests. Default 100.
	Requests int
	// Concurrency bounds the requests in flight. Default 10.
	Concurrency int
	// Keys is the number of distinct idempotency keys, at most Requests. Default 1.
	Keys int
	// KeyHeader is the request header carrying the key. Default Idempotency-Key.
	KeyHeader string
	// KeyFormat is how key i is made: KeyFormatPrefix (the default) or KeyFormatUUID, for
	// an endpoint whose key is declared with format: uuid.
	KeyFormat string
	// KeyPrefix starts every key: key i is KeyPrefix+strconv.Itoa(i). Default: a random
	// "hammer-xxxxxxxx-" per run, so reruns don't collide. Printable ASCII without spaces,
	// commas or double quotes. With KeyFormatUUID it is the seed of the keys instead: key i
	// is the version 4 UUID made of the first 16 bytes of SHA-256(KeyPrefix, NUL, i), in
	// lowercase, so the same KeyPrefix gives the same keys.
	KeyPrefix string
	// Timeout bounds each request, from its release to the end of its body (with Retries,
	// each attempt and the request's attempts together). Default 30s.
	Timeout time.Duration
	// Retries makes each request a logical call of idemclient's retry loop: up to Retries
	// more attempts with the same key and body after a transport error, a 409 or 429
	// (after Retry-After) or a 5xx not stored, with jittered backoff; the request counts
	// its final answer. 0 (the default): one attempt per request, so that duplicates reach
	// the server exactly as sent.
	Retries int
	// Progress, when not nil, receives a progress line (done/total, rate) every
	// ProgressInterval while the run lasts; nothing if it ends sooner.
	Progress io.Writer
	// ProgressInterval is the time between progress lines. Default 1s.
	ProgressInterval time.Duration
	// Client sends the requests. Nil builds one whose Transport keeps at least
	// Concurrency idle connections per host and that does not follow redirects.
	Client *http.Client
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		return c, errors.New("a URL is required")
	}
	if c.Method == "" {
		c.Method = DefaultMethod
	}
	if !validToken(c.Method) {
		return c, fmt.Errorf("invalid method %q", c.Method)
	}
	for name, v := range map[string]*int{"requests": &c.Requests, "concurrency": &c.Concurrency, "keys": &c.Keys, "retries": &c.Retries} {
		if *v < 0 {
			return c, fmt.Errorf("%s must be positive, got %d", name, *v)
		}
	}
	if c.Requests == 0 {
		c.Requests = DefaultRequests
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.Keys > c.Requests {
		return c, fmt.Errorf("Keys %d must not exceed Requests %d", c.Keys, c.Requests)
	}
	if c.KeyHeader == "" {
		c.KeyHeader = DefaultKeyHeader
	}
	if !validToken(c.KeyHeader) {
		return c, fmt.Errorf("invalid key header name %q", c.KeyHeader)
	}
	switch c.KeyFormat {
	case "":
		c.KeyFormat = KeyFormatPrefix
	case KeyFormatPrefix, KeyFormatUUID:
	default:
		return c, fmt.Errorf("key format must be %s or %s, not %q", KeyFormatPrefix, KeyFormatUUID, c.KeyFormat)
	}
	if c.KeyPrefix == "" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return c, err
		}
		c.KeyPrefix = "hammer-" + hex.EncodeToString(b[:]) + "-"
	}
	for i := 0; i < len(c.KeyPrefix); i++ {
		if ch := c.KeyPrefix[i]; ch <= ' ' || ch > '~' || ch == ',' || ch == '"' {
			return c, fmt.Errorf("key prefix %q: byte %d is not printable ASCII or is a space, comma or quote", c.KeyPrefix, i)
		}
	}
	if c.Timeout < 0 || c.ProgressInterval < 0 {
		return c, errors.New("timeout and progress interval must be positive")
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = DefaultProgress
	}
	for name, vs := range c.Header {
		if !validToken(name) {
			return c, fmt.Errorf("invalid header name %q", name)
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n\x00") {
				return c, fmt.Errorf("header %s: value holds a line break or NUL", name)
			}
		}
	}
	// Check the URL as key 0 will send it.
	u, err := url.Parse(expand(c.URL, c.key(0), 0))
	if err != nil {
		return c, fmt.Errorf("invalid URL: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("invalid URL %q: want http:// or https:// and a host", c.URL)
	}
	return c, nil
}

// validToken reports whether s is an RFC 9110 token (method and header names).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// key returns key i.
func (c *Config) key(i int) string {
	if c.KeyFormat == KeyFormatUUID {
		return uuidKey(c.KeyPrefix, i)
	}
	return c.KeyPrefix + strconv.Itoa(i)
}

// uuidKey returns the version 4 UUID of key i under seed: the first 16 bytes of
// SHA-256(seed, NUL, i) with the version and variant bits set, in lowercase 8-4-4-4-12.
func uuidKey(seed string, i int) string {
	sum := sha256.Sum256([]byte(seed + "\x00" + strconv.Itoa(i)))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10 (RFC 9562)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// expand replaces the placeholders in s for key index i.
func expand(s, key string, i int) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	return strings.NewReplacer(KeyPlaceholder, key, IndexPlaceholder, strconv.Itoa(i)).Replace(s)
}

// newClient builds the default client: enough idle connections per host for the
// concurrency, no redirects.
func newClient(concurrency int) (*http.Client, *http.Transport) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(concurrency, 2)
	t.MaxIdleConns = max(concurrency, 100)
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, t
}

// record is what one request produced.
type record struct {
	done     bool
	key      int
	attempts int           // attempts sent: 1 unless Config.Retries
	status   int           // 0 when err != nil
	latency  time.Duration // release to end of body
	replayed bool
	err      error
	canceled bool // aborted by the run's context: neither a response nor a transport error
}

// observed is a response as compared for replays.
type observed struct {
	status   int
	body     string // first MaxBodyBytes bytes
	length   int64  // full body length, in bytes
	location string
}

// matches reports whether replay r matches original o: same status, same body bytes and
// length, and the same Location when both carry one.
func (o observed) matches(r observed) bool {
	return o.status == r.status && o.length == r.length && o.body == r.body &&
		(o.location == "" || r.location == "" || o.location == r.location)
}

// keyState collects the responses of one key that need their bodies.
type keyState struct {
	mu          sync.Mutex
	ref2xx      *observed        // first execution
	ref4xx      *observed        // first stored-kind 4xx not replayed
	firstReplay *observed        // first replay, for keys without an original
	replays     map[observed]int // distinct replays and their counts
	clientError *observed        // first 4xx other than 409 and 422, replayed or not
	refusal     *observed        // first response neither replayed nor a 2xx
}

// keyRequest is the request template of one key.
type keyRequest struct {
	index  int
	key    string
	url    string
	body   []byte
	header http.Header
}

func (c *Config) keyRequest(i int) keyRequest {
	key := c.key(i)
	kr := keyRequest{index: i, key: key, url: expand(c.URL, key, i), header: make(http.Header, len(c.Header)+1)}
	if c.Body != nil {
		kr.body = []byte(expand(string(c.Body), key, i))
	}
	for name, vs := range c.Header {
		for _, v := range vs {
			kr.header.Add(name, expand(v, key, i))
		}
	}
	kr.header.Set(c.KeyHeader, key)
	return kr
}

// duplicates returns how many requests key i gets.
func (c *Config) duplicates(i int) int {
	d := c.Requests / c.Keys
	if i < c.Requests%c.Keys {
		d++
	}
	return d
}

// Run hammers the endpoint described by cfg and returns what it saw. It returns an error
// only for an invalid cfg. When ctx is cancelled it stops, aborts the requests in flight
// and returns the partial result with Interrupted set.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client := cfg.Client
	if client == nil {
		var t *http.Transport
		client, t = newClient(cfg.Concurrency)
		defer t.CloseIdleConnections()
	}

	records := make([]record, cfg.Requests)
	keys := make([]keyState, cfg.Keys)
	var done atomic.Int64

	start := time.Now()
	stopProgress := startProgress(cfg.Progress, cfg.ProgressInterval, cfg.Requests, &done)

	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	next := 0 // index into records
dispatch:
	for k := 0; k < cfg.Keys; k++ {
		kr := cfg.keyRequest(k)
		var prev sync.WaitGroup // the key's previous burst
		for left := cfg.duplicates(k); left > 0; {
			prev.Wait()
			m := min(cfg.Concurrency, left)
			for j := 0; j < m; j++ {
				if ctx.Err() != nil {
					for ; j > 0; j-- {
						<-sem
					}
					break dispatch
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					for ; j > 0; j-- {
						<-sem
					}
					break dispatch
				}
			}
			release := make(chan struct{})
			var ready sync.WaitGroup
			ready.Add(m)
			prev.Add(m)
			for j := 0; j < m; j++ {
				rec := &records[next]
				next++
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer prev.Done()
					defer func() { <-sem }()
					send(ctx, client, &cfg, kr, &keys[k], rec, &ready, release)
					done.Add(1)
				}()
			}
			ready.Wait()
			close(release)
			left -= m
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()

	return analyze(&cfg, records, keys, elapsed, ctx.Err() != nil), nil
}

// send builds one request, waits for the burst's release, sends it and records the
// outcome in rec and ks.
func send(ctx context.Context, client *http.Client, cfg *Config, kr keyRequest, ks *keyState,
	rec *record, ready *sync.WaitGroup, release <-chan struct{}) {
	rec.done = true
	rec.key = kr.index
	var body io.Reader
	if kr.body != nil {
		body = bytes.NewReader(kr.body)
	}
	req, err := http.NewRequestWithContext(ctx, cfg.Method, kr.url, body)
	if err == nil {
		req.Header = kr.header.Clone()
		if h := req.Header.Get("Host"); h != "" {
			req.Host = h
		}
	}
	ready.Done()
	<-release
	if err != nil {
		rec.err = err
		return
	}

	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	t0 := time.Now()
	// idemclient sends the request (the key is the one in its header) and, with Retries,
	// retries it with that key; it reads the body whole (a body cut short is a transport
	// error).
	retry := &idemclient.Client{Doer: client, MaxAttempts: cfg.Retries + 1, AttemptTimeout: cfg.Timeout, MaxResponseBytes: MaxResponseBytes}
	resp, res, err := retry.Do(rctx, req, idemclient.Key{Header: cfg.KeyHeader})
	rec.latency = time.Since(t0)
	if res != nil {
		rec.attempts = res.Attempts
	}
	if err != nil {
		var ce *idemclient.CallError
		if errors.As(err, &ce) {
			err = ce.Err // the attempts are counted apart
		}
		rec.err, rec.canceled = withMethod(err, cfg.Method), ctx.Err() != nil
		return
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(resp.Body, MaxBodyBytes))
	if err == nil {
		var rest int64
		rest, err = io.Copy(io.Discard, resp.Body)
		n += rest
	}
	if err != nil {
		rec.err, rec.canceled = fmt.Errorf("reading the %d response body: %w", resp.StatusCode, err), ctx.Err() != nil
		return
	}
	rec.status = resp.StatusCode
	rec.replayed = strings.EqualFold(strings.TrimSpace(resp.Header.Get(ReplayedHeader)), "true")

	obs := observed{status: resp.StatusCode, body: buf.String(), length: n, location: resp.Header.Get("Location")}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if clientError(obs.status) && ks.clientError == nil {
		ks.clientError = &obs
	}
	if !rec.replayed && (obs.status < 200 || obs.status >= 300) && ks.refusal == nil {
		ks.refusal = &obs
	}
	switch {
	case rec.replayed:
		if ks.replays == nil {
			ks.replays = make(map[observed]int)
			ks.firstReplay = &obs
		}
		ks.replays[obs]++
	case obs.status >= 200 && obs.status < 300:
		if ks.ref2xx == nil {
			ks.ref2xx = &obs
		}
	case obs.status >= 400 && obs.status < 500 && !transient4xx(obs.status):
		if ks.ref4xx == nil {
			ks.ref4xx = &obs
		}
	}
}

// clientError reports whether status is a 4xx other than the protocol's own answers to
// a well-formed request: 409 (the key is in progress) and 422 (the key was used with
// another payload). Such a response means the request itself was refused (400 for a
// missing header or an invalid key, 401, 404, 413, 429, ...): nothing ran.
func clientError(status int) bool {
	return status >= 400 && status < 500 &&
		status != http.StatusConflict && status != http.StatusUnprocessableEntity
}

// withMethod names the method in err, a *url.Error from http.Client.Do, as it was sent:
// net/http writes the operation as "Post" (or "Foo" for FOO).
func withMethod(err error, method string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.Op = method
	}
	return err
}

// transient4xx reports the "try again" statuses a server answers without storing them.
func transient4xx(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return false
}

// startProgress prints a progress line to w every interval until the returned stop is
// called; stop waits for the printer to exit. A nil w prints nothing.
func startProgress(w io.Writer, interval time.Duration, total int, done *atomic.Int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		start := time.Now()
		last, lastAt, printed := int64(0), start, false
		for {
			select {
			case <-quit:
				if printed { // close the series, so the last line is not a partial count
					d := done.Load()
					fmt.Fprintf(w, "hammer: %d/%d requests done in %s\n", d, total, time.Since(start).Round(time.Millisecond))
				}
				return
			case now := <-tick.C:
				d := done.Load()
				rate := float64(d-last) / now.Sub(lastAt).Seconds()
				last, lastAt = d, now
				fmt.Fprintf(w, "hammer: %d/%d requests (%.0f%%), %.0f req/s\n",
					d, total, 100*float64(d)/float64(total), rate)
				printed = true
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
	}
}

// isTimeout reports whether err is a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
