package idemredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/idem"
)

// Defaults of a [Store].
const (
	// DefaultPrefix starts every Redis key the store writes.
	DefaultPrefix = "idem:"
	// DefaultCallTimeout bounds each round trip to Redis (claim, completion, release).
	DefaultCallTimeout = 2 * time.Second
	// DefaultUnavailableRetryAfter is the Retry-After of the 503 answered while Redis
	// cannot be reached.
	DefaultUnavailableRetryAfter = time.Second
)

// ErrEvictingPolicy is wrapped by the error of [New] when a Redis server's
// maxmemory-policy is not noeviction: under memory pressure it may delete a claim or a
// completed record, and the next retry of that key runs the business again.
var ErrEvictingPolicy = errors.New("idemredis: the Redis server's maxmemory-policy may evict idempotency keys")

// Store runs the idempotency protocol with its keys in Redis. Safe for concurrent use.
type Store struct {
	rdb    redis.UniversalClient
	prefix string

	scope         idem.ScopeFunc
	observe       idem.Observer
	tracer        idem.Tracer
	cacheable     func(status int) bool
	render        idem.RejectionRenderer
	maxBody       int64
	callTimeout   time.Duration
	unavailableRA int // seconds
	wait          time.Duration
	pollInterval  time.Duration
	allowEviction bool
	logger        *slog.Logger

	// hookBusinessDone, when set (tests only), runs after the business function returned
	// and before the completion: the window in which Redis may go away or the lease end.
	hookBusinessDone func()
	// hookPolled, when set (tests only), runs each time a waiting duplicate found the key
	// still held and is about to poll again.
	hookPolled func()
}

// Option configures a Store.
type Option func(*Store)

// WithScope sets the scope function; without one every key is in scope "". The same
// function as the PostgreSQL store's ([idem.WithScope]).
func WithScope(f idem.ScopeFunc) Option { return func(s *Store) { s.scope = f } }

// WithObserver sets the observer of outcomes (e.g. idemprom's Outcomes.Observe).
func WithObserver(o idem.Observer) Option { return func(s *Store) { s.observe = o } }

// WithTracer sets the tracer of the protocol's spans (the spans of idem.Span; e.g.
// idemotel's). Default: none.
func WithTracer(t idem.Tracer) Option { return func(s *Store) { s.tracer = t } }

// WithCacheable decides which response statuses are recorded and replayed; for the
// others the claim is released. Default: status < 500.
func WithCacheable(f func(status int) bool) Option { return func(s *Store) { s.cacheable = f } }

// WithRejectionRenderer renders the bodies of the store's rejections (400, 409, 413,
// 422, 503), like [idem.WithRejectionRenderer]: give both stores the same renderer.
// Default: RFC 9457 application/problem+json.
func WithRejectionRenderer(f idem.RejectionRenderer) Option { return func(s *Store) { s.render = f } }

// WithMaxBodyBytes bounds the streamed request bodies read into memory to fingerprint
// them (413 past it), like [idem.WithMaxBodyBytes]. Default [idem.DefaultMaxBodyBytes].
func WithMaxBodyBytes(n int64) Option { return func(s *Store) { s.maxBody = n } }

// WithPrefix sets the prefix of the store's Redis keys (default [DefaultPrefix]), e.g.
// to keep two services' keys apart on one server.
func WithPrefix(p string) Option { return func(s *Store) { s.prefix = p } }

// WithCallTimeout bounds each round trip to Redis (default [DefaultCallTimeout]). A claim
// that times out is answered 503; a completion that times out is lost (see the package
// documentation, "Desync"). The client's own ReadTimeout/WriteTimeout apply too; set
// ContextTimeoutEnabled on it for the deadline to reach the socket.
func WithCallTimeout(d time.Duration) Option { return func(s *Store) { s.callTimeout = d } }

// WithUnavailableRetryAfter sets the Retry-After of the 503 answered while Redis cannot
// be reached, rounded up to whole seconds (default [DefaultUnavailableRetryAfter]).
func WithUnavailableRetryAfter(d time.Duration) Option {
	return func(s *Store) { s.unavailableRA = max(1, int((d+time.Second-1)/time.Second)) }
}

// WithWait makes a duplicate whose key is held by a running request wait up to d (for
// the operations whose Policy.Wait, the marker's wait, is zero) for
// that request's answer and replay it (or, when the owner released the key, run
// itself), polling Redis, instead of answering 409 at once. The wait never outlasts the
// holder's lease. Default 0: 409 at once.
func WithWait(d time.Duration) Option { return func(s *Store) { s.wait = d } }

// WithLogger sets the logger of the warnings the store emits (a completion the lease
// outlived, a completion lost to a Redis failure, an evicting maxmemory-policy allowed
// by [AllowEvictingPolicy]). Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.logger = l } }

// AllowEvictingPolicy lets [New] start against a server whose maxmemory-policy may
// evict keys (anything but noeviction), or whose policy cannot be read (CONFIG disabled
// on a managed service), with a warning logged at level Error instead of the error
// wrapping [ErrEvictingPolicy]. Use it only when every retry running the business again
// after an eviction is acceptable.
func AllowEvictingPolicy() Option { return func(s *Store) { s.allowEviction = true } }

// New returns a Store on rdb (a *redis.Client, *redis.ClusterClient or
// *redis.FailoverClient) after checking the eviction policy of each of its servers
// (every master of a cluster): New fails with an error wrapping [ErrEvictingPolicy]
// unless maxmemory-policy is noeviction, or [AllowEvictingPolicy] is given. A server that
// cannot be reached is an error too.
func New(ctx context.Context, rdb redis.UniversalClient, opts ...Option) (*Store, error) {
	s := &Store{
		rdb:           rdb,
		prefix:        DefaultPrefix,
		scope:         func(context.Context) (string, error) { return "", nil },
		observe:       func(string, idem.Outcome) {},
		cacheable:     func(status int) bool { return status < 500 },
		maxBody:       idem.DefaultMaxBodyBytes,
		callTimeout:   DefaultCallTimeout,
		unavailableRA: int(DefaultUnavailableRetryAfter / time.Second),
		pollInterval:  20 * time.Millisecond,
	}
	for _, o := range opts {
		o(s)
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if err := s.checkEviction(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// checkEviction reads maxmemory-policy on every server rdb writes to.
func (s *Store) checkEviction(ctx context.Context) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	check := func(ctx context.Context, c *redis.Client) error {
		policy, err := maxmemoryPolicy(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil && !isConfigRefused(err):
			return fmt.Errorf("idemredis: reading maxmemory-policy of %s: %w", c.Options().Addr, err)
		case err != nil:
			errs = append(errs, fmt.Errorf("%w: %s does not tell its maxmemory-policy (%v)", ErrEvictingPolicy, c.Options().Addr, err))
		case policy != "noeviction":
			errs = append(errs, fmt.Errorf("%w: %s has maxmemory-policy %s; idempotency keys need noeviction (a full server then refuses new claims, answered 503, instead of deleting claims and records, which runs the business again on a retry)", ErrEvictingPolicy, c.Options().Addr, policy))
		}
		return nil
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	default:
		policy, perr := maxmemoryPolicy(ctx, s.rdb)
		switch {
		case perr != nil && !isConfigRefused(perr):
			err = fmt.Errorf("idemredis: reading maxmemory-policy: %w", perr)
		case perr != nil:
			errs = append(errs, fmt.Errorf("%w: the server does not tell its maxmemory-policy (%v)", ErrEvictingPolicy, perr))
		case policy != "noeviction":
			errs = append(errs, fmt.Errorf("%w: maxmemory-policy is %s; idempotency keys need noeviction", ErrEvictingPolicy, policy))
		}
	}
	if err != nil {
		return err
	}
	if len(errs) == 0 {
		return nil
	}
	joined := errors.Join(errs...)
	if !s.allowEviction {
		return fmt.Errorf("%w (idemredis.AllowEvictingPolicy accepts it)", joined)
	}
	s.logger.Error("idemredis: starting on a Redis server that may evict idempotency keys: an evicted key's retry runs the business again", "err", joined)
	return nil
}

func maxmemoryPolicy(ctx context.Context, c redis.Cmdable) (string, error) {
	m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", err
	}
	p, ok := m["maxmemory-policy"]
	if !ok {
		return "", errors.New("CONFIG GET maxmemory-policy returned nothing")
	}
	return strings.ToLower(p), nil
}

// isConfigRefused reports a server that answered but does not run CONFIG (a managed
// service that renames or forbids it), as opposed to one that could not be reached.
func isConfigRefused(err error) bool {
	var re redis.Error
	return errors.As(err, &re) || err.Error() == "CONFIG GET maxmemory-policy returned nothing"
}

// problem renders p with the store's renderer; retryAfter > 0 is sent as Retry-After.
func (s *Store) problem(o idem.Outcome, p idem.Problem, retryAfter int) *idem.Response {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	var resp *idem.Response
	if s.render == nil {
		resp = idem.ProblemResponse(p.Status, p.Detail) // RFC 9457, as the PostgreSQL store's default
		resp.Outcome = o
	} else {
		ct, body := s.render(p)
		resp = &idem.Response{Status: p.Status, Header: []idem.HeaderLine{{Name: "Content-Type", Value: ct}}, Body: body, Outcome: o}
	}
	if retryAfter > 0 {
		resp.Header = append(resp.Header, idem.HeaderLine{Name: "Retry-After", Value: fmt.Sprint(retryAfter)})
	}
	return resp
}

func (s *Store) reject(p *idem.Policy, o idem.Outcome, status int, detail string, retryAfter int) *idem.Response {
	s.observe(p.Operation, o)
	return s.problem(o, idem.Problem{Status: status, Detail: detail}, retryAfter)
}

// Record runs visit (a generated response object's Visit method) against an in-memory
// writer and returns what it wrote: [idem.Record], with its cap.
func (s *Store) Record(visit func(w http.ResponseWriter) error) (*idem.Response, error) {
	return idem.Record(visit)
}

// Reject answers a request of operation p that the generated handler refuses before
// [Store.Do] (a body key that is not a string: 400; a body over the limit: 413; a
// *idem.Problem itself), rendered like the store's own rejections, with the spans of a
// rejection.
func (s *Store) Reject(ctx context.Context, p *idem.Policy, err error) *idem.Response {
	_, endSpan := s.traceRequest(ctx, p)
	resp := s.rejection(p, err)
	endSpan(resp, nil)
	return resp
}

func (s *Store) rejection(p *idem.Policy, err error) *idem.Response {
	var pr *idem.Problem
	detail := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "idem: "), "idemredis: ")
	switch {
	case errors.As(err, &pr):
		s.observe(p.Operation, idem.OutcomeRejected)
		return s.problem(idem.OutcomeRejected, *pr, 0)
	case errors.Is(err, idem.ErrInvalidKey):
		return s.reject(p, idem.OutcomeInvalidKey, http.StatusBadRequest, detail, 0)
	case errors.Is(err, idem.ErrBodyTooLarge):
		return s.reject(p, idem.OutcomeRejected, http.StatusRequestEntityTooLarge, detail, 0)
	}
	return s.reject(p, idem.OutcomeRejected, http.StatusBadRequest, detail, 0)
}

// RequestErrorHandler answers a request the generated server could not decode, or that
// failed validation, with 400 (413 over the body limit) rendered like the store's
// rejections: [idem.Store.RequestErrorHandler] for a service whose marked operations all
// keep their keys in Redis. Such a request claims no key.
func (s *Store) RequestErrorHandler(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadRequest
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || errors.Is(err, idem.ErrBodyTooLarge) {
		status = http.StatusRequestEntityTooLarge
	}
	detail := strings.TrimPrefix(err.Error(), "idem: ")
	_ = s.problem(idem.OutcomeRejected, idem.Problem{Status: status, Detail: detail}, 0).WriteTo(w)
}
