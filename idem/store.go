package idem

import (
	"context"
	"fmt"
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
	// Lease is the longest a claim whose owner is gone blocks retries before one of them
	// may reclaim it. It never cancels a live owner. Zero means [DefaultLease].
	Lease time.Duration
	// Retention is how long a completed key is replayed (from its completion). Past it,
	// the key is free for a new request. Zero means [DefaultRetention].
	Retention time.Duration
	// Timeout bounds the business function's run (its context is cancelled then, and the
	// transaction rolled back and the claim released), with or without a key. Zero means no
	// bound beyond the request's own context.
	Timeout time.Duration
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

func (p *Policy) retention() time.Duration {
	if p.Retention > 0 {
		return p.Retention
	}
	return DefaultRetention
}

// Store runs the protocol against one PostgreSQL pool. Safe for concurrent use.
type Store struct {
	// pool runs the business transactions and, in the same flights, the claims.
	pool *pgxpool.Pool
	wire wire // how flights talk to pool's connections
	// q runs the autocommitted statements outside flights (release, maintenance): on the
	// claim pool when there is one, else on pool.
	q *idemdb.Queries
	// claimPool, set by WithClaimPool, runs the claim phase instead of the business
	// connection's first flight.
	claimPool *pgxpool.Pool

	scope      ScopeFunc
	observe    Observer
	tracer     Tracer // nil: no spans (WithTracer)
	cacheable  func(status int) bool
	maxRetries int
	render     RejectionRenderer
	maxBody    int64
	// maxResponseBytes caps a recorded response body; 0 means DefaultMaxResponseBytes.
	maxResponseBytes int64

	// hookClaimed, when set (tests only), runs after a claim is won and before the
	// business transaction begins: the window in which an owner can lose its lease. The
	// claim then travels apart from BEGIN and the own-row lock, as with a claim pool.
	hookClaimed func()
}

// Option configures a Store.
type Option func(*Store)

// WithScope sets the scope function; without one every key is in scope "".
func WithScope(f ScopeFunc) Option { return func(s *Store) { s.scope = f } }

// WithObserver sets the observer of outcomes (metrics).
func WithObserver(o Observer) Option { return func(s *Store) { s.observe = o } }

// WithCacheable decides which response statuses are stored and replayed. Others roll the
// business transaction back and release the key. Default: status < 500.
func WithCacheable(f func(status int) bool) Option { return func(s *Store) { s.cacheable = f } }

// WithClaimPool runs the claim phase (claim, read, takeover, reclaim) and the protocol's
// other autocommitted statements (release, and the Purge/StaleClaims/RepeatedPayloads
// maintenance queries) on their own pool, so that duplicates are answered 409 or replayed
// at once even while every connection of the business pool is held by business
// transactions (a slow payment provider, a retry storm, a hot row lock). A few
// connections are enough: each statement is one short round trip.
//
// The price: without a claim pool a fresh request's claim, BEGIN and own-row lock travel
// in one flight on the business connection; with one, the claim is a round trip of its
// own (see the package documentation, "Flights"). Default: no claim pool.
func WithClaimPool(pool *pgxpool.Pool) Option {
	return func(s *Store) { s.q, s.claimPool = idemdb.New(pool), pool }
}

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
		scope:      func(context.Context) (string, error) { return "", nil },
		observe:    func(string, Outcome) {},
		cacheable:  func(status int) bool { return status < 500 },
		maxRetries: DefaultMaxRetries,
		render:     renderProblemJSON,
		maxBody:    DefaultMaxBodyBytes,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Migrate applies schema.sql (idempotent; serialised by an advisory lock, so replicas may
// call it at once on start).
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
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("idem: migrate: %w", err)
	}
	return nil
}
