package idem

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen"
	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// Defaults of a [Policy] whose fields are zero.
const (
	DefaultLease      = 30 * time.Second
	DefaultRetention  = 24 * time.Hour
	DefaultMaxRetries = 3
)

// Policy is the idempotency policy of one operation. The generated code declares one per
// marked operation, from its x-idempotent marker. A zero duration field means its documented
// default; a set one must be at least [MinPolicyDuration], none may be negative, and the
// retention must be at least the lease: [NewPolicy] and [MustPolicy] check a hand-written
// policy when it is built, and [Store.Do] refuses one that breaks a rule (an error wrapping
// [ErrInvalidPolicy], before any SQL).
type Policy struct {
	// Operation is the operation id. It is stored with the key: a key reused on another
	// operation is answered 422.
	Operation string
	// KeySource names where the key is read, for messages: "header Idempotency-Key" or
	// "body /idempotency_key".
	KeySource string
	// KeyRequired: a request without a key is answered 400. When false, such a request runs
	// the business function in a plain transaction, with no idempotency.
	KeyRequired bool
	// Lease is the longest a claim whose owner went silent (crashed, partitioned,
	// blackholed, frozen) blocks retries. A crashed or killed owner frees the key at once
	// (its transaction rolls back); a silent one is cut off by the database once its
	// transaction has been idle for the lease (idle_in_transaction_session_timeout). A live
	// owner is never cut off within its Timeout: when Timeout is set and the lease is
	// shorter than Timeout + 1s, the idle bound is Timeout + 1s instead (so a silent owner
	// of such a policy blocks retries up to Timeout + 1s). Without a Timeout, a business
	// function that keeps its transaction idle (no statement running) for longer than the
	// lease is cut off: its next statement fails and nothing commits. The idle bound is
	// never under 1s, whatever the lease (which still sets Retry-After and the stale-claim
	// age). Zero means [DefaultLease].
	Lease time.Duration
	// Retention is how long a completed key is replayed (from its completion). Past it,
	// the key is free for a new request. Zero means [DefaultRetention].
	Retention time.Duration
	// Timeout bounds the business function's run (its context is cancelled then, and the
	// transaction rolled back), with or without a key. Zero means no bound beyond the
	// request's own context.
	Timeout time.Duration
	// Wait is how long a duplicate (a request whose key another transaction holds) waits
	// for the owner's answer before it is answered 409: when the owner commits within the
	// wait, the duplicate replays its answer; when it rolls back, the duplicate runs the
	// request itself. Zero: no wait, 409 at once. Waiting duplicates hold no connection
	// while their owner runs in this process; for an owner elsewhere at most a quarter of
	// the pool's connections wait in the database (the other duplicates poll), so waiters
	// never starve owners of connections.
	Wait time.Duration
	// Isolation is the business transaction's isolation level; "" is the database default.
	Isolation pgx.TxIsoLevel
	// KeySchema is what the spec declares about the key's value (length, pattern, uuid
	// format), checked before any SQL; nil checks nothing beyond [ParseKey].
	KeySchema *KeySchema
}

func (p *Policy) lease() time.Duration {
	if p.Lease > 0 {
		return p.Lease
	}
	return DefaultLease
}

// minIdleBound is the shortest idle bound of a transaction: a lease under a second would
// cut off owners between two statements of their business.
const minIdleBound = time.Second

// idleBound is the idle_in_transaction_session_timeout of the policy's transactions: the
// lease (at least minIdleBound), or Timeout + 1s when that is longer (a live owner is never
// cut off within its timeout).
func (p *Policy) idleBound() time.Duration {
	d := max(p.lease(), minIdleBound)
	if p.Timeout > 0 && p.Timeout+time.Second > d {
		d = p.Timeout + time.Second
	}
	return d
}

func (p *Policy) retention() time.Duration {
	if p.Retention > 0 {
		return p.Retention
	}
	return DefaultRetention
}

// Store runs the protocol against one PostgreSQL pool. Safe for concurrent use.
type Store struct {
	// pool runs the business transactions, each with its claim.
	pool *pgxpool.Pool
	wire wire // how flights talk to pool's connections
	// q runs the statements outside flights (maintenance, reads for people); scan those
	// that read every shard on Citus, in the simple protocol (see simpleProtocol).
	q    *idemdb.Queries
	scan *idemdb.Queries

	scope      ScopeFunc
	observe    Observer
	tracer     Tracer // nil: no spans (WithTracer)
	cacheable  func(status int) bool
	maxRetries int
	render     RejectionRenderer
	maxBody    int64
	// maxResponseBytes caps a recorded response body; 0 means DefaultMaxResponseBytes.
	maxResponseBytes int64

	pooler         bool          // WithTransactionPooler: the session is never ours
	acquireTimeout time.Duration // WithAcquireTimeout
	flightTimeout  time.Duration // WithFlightTimeout
	// staleAfter, when set (WithStaleAfter), is the age past which a held claim counts as
	// stale; else the longest idle bound of the policies this store ran (longestHold).
	staleAfter  time.Duration
	longestHold atomic.Int64 // nanoseconds
	// citus: 0 not known yet, 1 plain PostgreSQL, 2 a Citus node (citusCached).
	citus atomic.Int32

	// owners are the keys this process's calls hold now, for duplicates that wait
	// (Policy.Wait); waiters bounds the duplicates that wait in the database.
	owners  ownerMap
	waiters chan struct{}
}

// Option configures a Store.
type Option func(*Store)

// Defaults of the store's deadlines.
const (
	// DefaultAcquireTimeout bounds the wait for a pool connection ([WithAcquireTimeout]).
	DefaultAcquireTimeout = 5 * time.Second
	// DefaultFlightTimeout bounds each of the protocol's own round trips: the claim, the
	// completion with COMMIT, a rollback ([WithFlightTimeout]).
	DefaultFlightTimeout = 10 * time.Second
)

// WithAcquireTimeout bounds how long a request waits for a connection of the pool (a
// pool whose connections are all held, or whose database is unreachable, fails the
// request then instead of holding it). A wait that the timeout ends is an error wrapping
// [ErrPoolExhausted], which [ResponseErrorHandler] answers 503 with Retry-After; a dial
// refused before it keeps its own error. Default [DefaultAcquireTimeout]; it panics when
// d is not positive.
func WithAcquireTimeout(d time.Duration) Option {
	mustBePositive("WithAcquireTimeout", d)
	return func(s *Store) { s.acquireTimeout = d }
}

// WithFlightTimeout bounds each round trip of the protocol itself (the claim's flight, the
// completion's flight with COMMIT, a rollback, a read after a lost completion), whatever
// the request's context. A flight past it closes its connection: the database rolls the
// transaction back, and a completion flight so cut is answered as an unknown commit
// outcome ([ErrCommitUnknown]). The deadline is the connection's socket deadline, set for
// the flight only (see Deadlines in the package documentation); the error of a flight past
// it wraps context.DeadlineExceeded. Default [DefaultFlightTimeout]; it panics when d is
// not positive.
func WithFlightTimeout(d time.Duration) Option {
	mustBePositive("WithFlightTimeout", d)
	return func(s *Store) { s.flightTimeout = d }
}

// WithStaleAfter sets the age past which [Store.StaleClaims] and [Store.HeldClaims] count
// a held claim as stale (held past its lease). Default: the longest lease (or, when a
// policy's timeout is longer, timeout + 1s: see [Policy.Lease]) of the policies this store
// has run, else [DefaultLease]. It panics when d is not positive.
func WithStaleAfter(d time.Duration) Option {
	mustBePositive("WithStaleAfter", d)
	return func(s *Store) { s.staleAfter = d }
}

// WithTransactionPooler tells the store that its pool's connections go through a
// transaction pooler (PgBouncer's pool_mode=transaction, and the like): a session's
// settings then reach only the server connection a transaction happens to run on. The
// lease's idle bound (idle_in_transaction_session_timeout) is then set with SET LOCAL in
// every transaction, one statement more in the claim's flight, also in pgx's default
// cache_statement mode, which PgBouncer 1.21+ runs with max_prepared_statements. Without
// it that mode sets the bound once per connection, on its session: behind such a pooler,
// on one server connection only, and a silent owner elsewhere would not be cut off within
// its lease. (In pgx's exec and simple_protocol modes the bound is always SET LOCAL.)
func WithTransactionPooler() Option { return func(s *Store) { s.pooler = true } }

// WithScope sets the scope function; without one every key is in scope "".
func WithScope(f ScopeFunc) Option { return func(s *Store) { s.scope = f } }

// WithObserver sets the observer of outcomes (metrics).
func WithObserver(o Observer) Option { return func(s *Store) { s.observe = o } }

// WithCacheable decides which response statuses are stored and replayed. Others roll the
// business transaction back (the key with it). Default: status < 500.
func WithCacheable(f func(status int) bool) Option { return func(s *Store) { s.cacheable = f } }

// WithMaxRetries bounds the re-runs of a business transaction after a serialization
// failure (40001) or deadlock (40P01). Default [DefaultMaxRetries]; 0 disables them. It
// panics when n is negative.
func WithMaxRetries(n int) Option {
	mustNotBeNegative("WithMaxRetries", int64(n), "no retries")
	return func(s *Store) { s.maxRetries = n }
}

// NewStore returns a Store on pool. The idempotency_keys table must exist ([Migrate]).
func NewStore(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{
		pool:       pool,
		wire:       wireOf(pool),
		q:          idemdb.New(pool),
		scan:       idemdb.New(simpleProtocol{pool}),
		scope:      func(context.Context) (string, error) { return "", nil },
		observe:    func(string, Outcome) {},
		cacheable:  func(status int) bool { return status < 500 },
		maxRetries: DefaultMaxRetries,
		render:     renderProblemJSON,
		maxBody:    DefaultMaxBodyBytes,

		acquireTimeout: DefaultAcquireTimeout,
		flightTimeout:  DefaultFlightTimeout,
	}
	for _, o := range opts {
		o(s)
	}
	s.waiters = make(chan struct{}, max(1, pool.Config().MaxConns/4))
	return s
}

// Migrate applies schema.sql (idempotent; serialised by an advisory lock, so replicas may
// call it at once on start). On a table made by idemgen v1 it does what migration 00002
// does: v1's lease columns get defaults, v1's index of unfinished claims is dropped (the
// rows v1 left 'processing' are taken over by the next request with their key once their
// lease ended, or purged past retention); a re-run changes nothing and takes no table lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("idem: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(7255043114)"); err != nil {
		return fmt.Errorf("idem: migrate: %w", err)
	}
	if _, err := tx.Exec(ctx, idemgen.Schema, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("idem: migrate: %w", err)
	}
	var citus bool
	var level string
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus'),
		current_setting('default_transaction_isolation')`).Scan(&citus, &level); err != nil {
		return fmt.Errorf("idem: migrate: %w", err)
	}
	if citus && level == "serializable" {
		return fmt.Errorf("idem: migrate: the default isolation is serializable: %w", ErrSerializableOnCitus)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("idem: migrate: %w", err)
	}
	return nil
}
