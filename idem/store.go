package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
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

// Tx is what business code gets inside the protocol's transaction: the query methods of a
// pgx.Tx and nothing else (no Commit, no Rollback: the protocol commits the business
// writes together with the key's outcome). It has the method set of sqlc's pgx/v5 DBTX
// (plus CopyFrom and SendBatch), so `db.New(tx)` works with sqlc-generated queries.
type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// txOnly hides Commit/Rollback/Conn of a pgx.Tx from business code.
type txOnly struct{ tx pgx.Tx }

func (t txOnly) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.tx.Exec(ctx, sql, args...)
}
func (t txOnly) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.tx.Query(ctx, sql, args...)
}
func (t txOnly) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}
func (t txOnly) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.tx.CopyFrom(ctx, table, columns, src)
}
func (t txOnly) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.tx.SendBatch(ctx, b)
}

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

// Outcome names what the protocol did. [Response.Outcome] holds the final one; an
// [Observer] sees every one on the way (e.g. claimed, then completed).
type Outcome string

const (
	// Final outcomes of a call.
	OutcomeCompleted  Outcome = "completed"   // business committed, response stored (the one execution)
	OutcomeReplayed   Outcome = "replayed"    // stored response replayed
	OutcomeInProgress Outcome = "in_progress" // 409: another request holds the key
	OutcomeMismatch   Outcome = "mismatch"    // 422: other payload or operation
	OutcomeMissingKey Outcome = "missing_key" // 400: no key, and one is required
	OutcomeInvalidKey Outcome = "invalid_key" // 400: key fails ParseKey
	OutcomeLeaseLost  Outcome = "lease_lost"  // 409: our claim was reclaimed; business rolled back
	OutcomeNotStored  Outcome = "not_stored"  // business ran, response not cacheable (5xx): rolled back, released
	OutcomeUnkeyed    Outcome = "unkeyed"     // no key, not required: ran without idempotency
	OutcomeRejected   Outcome = "rejected"    // a problem response made by ProblemResponse

	// Events an Observer sees along the way.
	OutcomeClaimed   Outcome = "claimed"    // new row inserted
	OutcomeTakenOver Outcome = "taken_over" // row past retention claimed afresh
	OutcomeReclaimed Outcome = "reclaimed"  // processing row past its lease claimed with a new fencing token
	OutcomeReleased  Outcome = "released"   // claim deleted after a rollback
	OutcomeRetried   Outcome = "retried"    // business transaction retried after 40001/40P01
	OutcomeFailed    Outcome = "failed"     // business error; rolled back (and released unless the commit was ambiguous)
)

// Observer is called for every outcome and event, with the operation id. It must be cheap
// and safe for concurrent use (the Prometheus adapter increments a counter).
type Observer func(operation string, o Outcome)

// ScopeFunc returns the scope (tenant or principal namespace) of the request in ctx.
// Keys are unique per scope. An error wrapping a *[Problem] is answered with that problem
// (e.g. 401, 403) before any SQL; any other error fails the request with that error.
type ScopeFunc func(ctx context.Context) (string, error)

// Func is the business function: it runs inside the protocol's transaction and returns the
// recorded response (see [Record]). It may run more than once when the transaction hits a
// serialization failure or deadlock, and must do all its database work through tx.
type Func func(ctx context.Context, tx Tx) (*Response, error)

// Store runs the protocol against one PostgreSQL pool. Safe for concurrent use.
type Store struct {
	pool       *pgxpool.Pool
	q          *idemdb.Queries
	scope      ScopeFunc
	observe    Observer
	cacheable  func(status int) bool
	maxRetries int
	render     RejectionRenderer
	maxBody    int64
	// maxResponseBytes caps a recorded response body; 0 means DefaultMaxResponseBytes.
	maxResponseBytes int64

	// hookClaimed, when set (tests only), runs after a claim is won and before the
	// business transaction begins: the window in which an owner can lose its lease.
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

// WithClaimPool runs the protocol's autocommitted statements (claim, read, takeover,
// reclaim, release, and the Purge/StaleClaims/RepeatedPayloads maintenance queries) on
// their own pool, so that duplicates are answered 409 or replayed at once even while every
// connection of the business pool is held by business transactions (a retry storm, a
// hot row lock). A few connections are enough: each statement is one short round trip.
// Default: the business pool.
func WithClaimPool(pool *pgxpool.Pool) Option {
	return func(s *Store) { s.q = idemdb.New(pool) }
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

type ctxKey struct{}

// KeyInfo is the idempotency key of the request being run, for business code (e.g. to pass
// downstream as a payment provider's idempotency key).
type KeyInfo struct {
	Scope string
	Key   string
}

// KeyFromContext returns the key of the request whose business function got ctx; ok is
// false when the request carried none.
func KeyFromContext(ctx context.Context) (k KeyInfo, ok bool) {
	k, ok = ctx.Value(ctxKey{}).(KeyInfo)
	return k, ok
}

// claimPhaseTimeout bounds the claim phase's statements (claim, read, takeover,
// reclaim), which do not follow the request's cancellation.
const claimPhaseTimeout = 10 * time.Second

// call is one request's run through the protocol.
type call struct {
	s     *Store
	p     *Policy
	scope string
	key   string
	fp    []byte
	// Our claim, once won: its fencing token, and the ctid of its row version as the
	// claim, takeover or reclaim returned it (the business transaction addresses its key
	// row by it, see LockOwnKey).
	token int64
	rowID string
}

// Do runs fn under the idempotency protocol (see the package documentation).
//
// rawKey is the key as received (nil when absent); it is validated with [ParseKey] before any
// SQL. parts are the request's fingerprint inputs ([Fingerprint]). The returned Response is
// what to send: fn's own response (OutcomeCompleted or OutcomeNotStored), a replay, or a
// problem-details rejection. err is fn's error (after rollback and release), or a database
// error of the protocol itself; the caller answers it as a server error. An error wrapping
// [ErrCommitUnknown] means the COMMIT got no answer: the claim is kept until its lease ends.
// A policy that breaks a rule of [Policy] is an error wrapping [ErrInvalidPolicy], before any
// SQL; a response body over the cap ([WithMaxResponseBytes]) is an error wrapping
// [ErrResponseTooLarge], rolled back and released like any business error.
func (s *Store) Do(ctx context.Context, p *Policy, rawKey *string, parts []Part, fn Func) (*Response, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	fn = s.capResponse(fn)
	if rawKey == nil {
		if p.KeyRequired {
			return s.reject(p, OutcomeMissingKey, http.StatusBadRequest,
				fmt.Sprintf("this operation requires an idempotency key (%s)", p.KeySource), 0), nil
		}
		if resp := s.bufferBodies(p, parts); resp != nil {
			return resp, nil
		}
		return s.unkeyed(ctx, p, fn)
	}
	key, err := ParseKey(*rawKey)
	if err == nil {
		err = p.KeySchema.Check(key)
	}
	if errors.Is(err, ErrInvalidPattern) {
		return nil, err
	}
	if err != nil {
		return s.reject(p, OutcomeInvalidKey, http.StatusBadRequest, err.Error(), 0), nil
	}
	scope, err := s.scope(ctx)
	if err != nil {
		var pr *Problem
		if errors.As(err, &pr) {
			s.observe(p.Operation, OutcomeRejected)
			return s.problem(OutcomeRejected, *pr, 0), nil
		}
		return nil, err
	}
	if resp := s.bufferBodies(p, parts); resp != nil {
		return resp, nil
	}
	fp, err := Fingerprint(p.Operation, parts...)
	if err != nil {
		return nil, err
	}
	c := &call{s: s, p: p, scope: scope, key: key, fp: fp}
	return c.run(ctx, fn)
}

func (s *Store) reject(p *Policy, o Outcome, status int, detail string, retryAfter int) *Response {
	s.observe(p.Operation, o)
	return s.problem(o, Problem{Status: status, Detail: detail}, retryAfter)
}

func (c *call) run(ctx context.Context, fn Func) (*Response, error) {
	q, p := c.s.q, c.p
	lease, retention := p.lease(), p.retention()
	// The claim phase runs under a context the client's going away cannot cancel: a claim
	// whose INSERT committed while its caller gave up would otherwise block retries for
	// the whole lease. execute then notices the cancelled ctx and releases the claim.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimPhaseTimeout)
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		claim, err := q.ClaimKey(qctx, idemdb.ClaimKeyParams{
			Scope: c.scope, Key: c.key, Operation: p.Operation, Fingerprint: c.fp,
			LeaseUs: lease.Microseconds(), RetentionUs: retention.Microseconds(),
		})
		if err == nil {
			c.token, c.rowID = claim.LeaseToken, claim.RowID
			return c.execute(ctx, OutcomeClaimed, fn)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("idem: claim: %w", err)
		}
		row, err := c.get(qctx)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // released between our insert and read: claim again
		}
		if err != nil {
			return nil, err
		}
		if row.Expired {
			took, err := q.TakeOverExpired(qctx, idemdb.TakeOverExpiredParams{
				Scope: c.scope, Key: c.key, Operation: p.Operation, Fingerprint: c.fp,
				LeaseUs: lease.Microseconds(), RetentionUs: retention.Microseconds(),
			})
			if err == nil {
				c.token, c.rowID = took.LeaseToken, took.RowID
				return c.execute(ctx, OutcomeTakenOver, fn)
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return nil, fmt.Errorf("idem: take over expired key: %w", err)
			}
			continue // someone else took it over or holds it: read again
		}
		if resp := c.answer(row); resp != nil {
			return resp, nil
		}
		// processing, lease expired: the owner is gone, or alive and holding its row lock.
		reclaimed, err := q.ReclaimKey(qctx, idemdb.ReclaimKeyParams{
			Scope: c.scope, Key: c.key, Operation: p.Operation, Fingerprint: c.fp,
			LeaseUs: lease.Microseconds(),
		})
		if err == nil {
			c.token, c.rowID = reclaimed.LeaseToken, reclaimed.RowID
			return c.execute(ctx, OutcomeReclaimed, fn)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("idem: reclaim: %w", err)
		}
		// Lost the reclaim: read once more and answer 409 or replay.
		row, err = c.get(qctx)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if resp := c.answer(row); resp != nil {
			return resp, nil
		}
		return c.inProgress(1), nil
	}
	return c.inProgress(1), nil
}

func (c *call) get(ctx context.Context) (idemdb.GetKeyRow, error) {
	row, err := c.s.q.GetKey(ctx, idemdb.GetKeyParams{Scope: c.scope, Key: c.key})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return row, fmt.Errorf("idem: read key: %w", err)
	}
	return row, err
}

// answer decides a request whose key is held by an unexpired row: 422, replay or 409.
// It returns nil for a processing row past its lease (a reclaim candidate).
func (c *call) answer(row idemdb.GetKeyRow) *Response {
	p := c.p
	switch {
	case row.Operation != p.Operation:
		return c.s.reject(p, OutcomeMismatch, http.StatusUnprocessableEntity,
			fmt.Sprintf("this idempotency key was used for another operation (%s)", row.Operation), 0)
	case !bytes.Equal(row.Fingerprint, c.fp):
		return c.s.reject(p, OutcomeMismatch, http.StatusUnprocessableEntity,
			"this idempotency key was used with a different request payload", 0)
	case row.Status == "completed":
		resp := &Response{Status: int(row.ResponseStatus.Int32), Body: row.ResponseBody, Outcome: OutcomeReplayed}
		if resp.Body == nil {
			resp.Body = []byte{}
		}
		if err := json.Unmarshal(row.ResponseHeaders, &resp.Header); err != nil {
			resp.Header = nil // written by us; a broken value replays without headers
		}
		c.s.observe(p.Operation, OutcomeReplayed)
		return resp
	case !row.LeaseExpired:
		return c.inProgress(int(math.Ceil(row.LeaseRemainingSeconds)))
	}
	return nil
}

// inProgress answers 409 with Retry-After: the lease's seconds left, clamped to 1..lease
// and, when the policy has a timeout, to at most the timeout.
func (c *call) inProgress(seconds int) *Response {
	maxS := int(math.Ceil(c.p.lease().Seconds()))
	if c.p.Timeout > 0 {
		// A live owner finishes (or is cancelled and released) within its timeout.
		maxS = min(maxS, int(math.Ceil(c.p.Timeout.Seconds())))
	}
	seconds = max(1, min(seconds, maxS))
	return c.s.reject(c.p, OutcomeInProgress, http.StatusConflict,
		"a request with this idempotency key is being processed; retry later", seconds)
}

// execute runs the business transaction of the claim we hold (c.token, c.rowID).
func (c *call) execute(ctx context.Context, how Outcome, fn Func) (*Response, error) {
	s, p := c.s, c.p
	s.observe(p.Operation, how)
	if s.hookClaimed != nil {
		s.hookClaimed()
	}
	for attempt := 0; ; attempt++ {
		resp, retry, err := c.attempt(ctx, fn)
		if retry {
			if attempt < s.maxRetries {
				s.observe(p.Operation, OutcomeRetried)
				continue
			}
			// Out of retries: a business failure like any other.
			s.observe(p.Operation, OutcomeFailed)
			c.release(context.WithoutCancel(ctx))
		}
		return resp, err
	}
}

// ErrCommitUnknown is wrapped by the error of a call whose COMMIT got no answer (the
// connection was lost): the business writes may or may not have committed. The claim is
// not released; once its lease ends a retry reclaims it, or replays if the commit landed.
var ErrCommitUnknown = errors.New("idem: commit outcome unknown")

// errNoResponse is the error of a business function that returned neither a response nor
// an error.
var errNoResponse = errors.New("idem: business function returned no response and no error")

// attempt is one business transaction: lock own row → fn → fenced complete → commit.
// retry reports a serialization failure or deadlock, rolled back, with the claim not
// released (execute releases it when no retry follows; a retry's lock finds out whether the
// claim is still ours).
func (c *call) attempt(ctx context.Context, fn Func) (resp *Response, retry bool, err error) {
	s, p := c.s, c.p
	bg := context.WithoutCancel(ctx)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: p.Isolation})
	if err != nil {
		c.release(bg)
		return nil, false, fmt.Errorf("idem: begin: %w", err)
	}
	defer tx.Rollback(bg) // no-op after a commit
	q := s.q.WithTx(tx)
	if _, err := q.LockOwnKey(ctx, idemdb.LockOwnKeyParams{RowID: c.rowID, Scope: c.scope, Key: c.key, LeaseToken: c.token}); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return c.leaseLost(), false, nil
		}
		// Under REPEATABLE READ or SERIALIZABLE a reclaim that committed since our
		// snapshot fails the lock with 40001: retried, the lock sees the new token.
		return c.fail(bg, tx, fmt.Errorf("idem: lock own key: %w", err))
	}
	// A panicking business function is a business error (net/http recovers the panic and
	// the process lives on): roll back and release, then let the panic continue.
	// runtime.Goexit is not recovered: an owner that is gone does not release.
	defer func() {
		if v := recover(); v != nil {
			_ = tx.Rollback(bg)
			s.observe(p.Operation, OutcomeFailed)
			c.release(bg)
			panic(v)
		}
	}()

	bctx := context.WithValue(ctx, ctxKey{}, KeyInfo{Scope: c.scope, Key: c.key})
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		bctx, cancel = context.WithTimeout(bctx, p.Timeout)
		defer cancel()
	}
	resp, err = fn(bctx, txOnly{tx})
	if err == nil && resp == nil {
		err = errNoResponse
	}
	if err != nil {
		return c.fail(bg, tx, err)
	}
	if !s.cacheable(resp.Status) {
		_ = tx.Rollback(bg)
		c.release(bg)
		resp.Outcome = OutcomeNotStored
		s.observe(p.Operation, OutcomeNotStored)
		return resp, false, nil
	}
	headers, err := json.Marshal(resp.StoredHeader())
	if err != nil {
		return c.fail(bg, tx, fmt.Errorf("idem: encode headers: %w", err))
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	// The business ran: finish under a context the client's going away cannot cancel.
	n, err := q.CompleteKey(bg, idemdb.CompleteKeyParams{
		RowID: c.rowID, Scope: c.scope, Key: c.key, LeaseToken: c.token,
		ResponseStatus:  pgtype.Int4{Int32: int32(resp.Status), Valid: true},
		ResponseHeaders: headers, ResponseBody: body,
		RetentionUs: p.retention().Microseconds(),
	})
	if err != nil {
		return c.fail(bg, tx, fmt.Errorf("idem: complete: %w", err))
	}
	if n != 1 {
		return c.leaseLost(), false, nil
	}
	if err := tx.Commit(bg); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			// No answer from the server: the commit may have happened. Do not release;
			// the lease and reclaim settle it.
			s.observe(p.Operation, OutcomeFailed)
			return nil, false, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
		}
		return c.fail(bg, tx, fmt.Errorf("idem: commit: %w", err))
	}
	resp.Outcome = OutcomeCompleted
	s.observe(p.Operation, OutcomeCompleted)
	return resp, false, nil
}

// fail rolls back; a serialization failure or deadlock is reported for retry, any other
// error releases the claim.
func (c *call) fail(bg context.Context, tx pgx.Tx, err error) (*Response, bool, error) {
	_ = tx.Rollback(bg)
	if retryable(err) {
		return nil, true, err
	}
	c.s.observe(c.p.Operation, OutcomeFailed)
	c.release(bg)
	return nil, false, err
}

func (c *call) leaseLost() *Response {
	return c.s.reject(c.p, OutcomeLeaseLost, http.StatusConflict,
		"this request's claim on the idempotency key was taken over by a retry; its work was rolled back", 1)
}

// release deletes our claim so a retry runs at once. Failure is tolerated: the lease
// bounds how long the claim blocks retries.
func (c *call) release(bg context.Context) {
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	n, err := c.s.q.ReleaseKey(ctx, idemdb.ReleaseKeyParams{Scope: c.scope, Key: c.key, LeaseToken: c.token})
	if err == nil && n == 1 {
		c.s.observe(c.p.Operation, OutcomeReleased)
	}
}

// retryable reports a serialization failure (40001) or deadlock (40P01): the transaction
// was rolled back and may simply run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// unkeyed runs fn in a plain transaction: the policy allows requests without a key.
func (s *Store) unkeyed(ctx context.Context, p *Policy, fn Func) (*Response, error) {
	s.observe(p.Operation, OutcomeUnkeyed)
	bg := context.WithoutCancel(ctx)
	for attempt := 0; ; attempt++ {
		resp, err := s.plainTx(ctx, bg, p, fn)
		if retryable(err) && attempt < s.maxRetries {
			s.observe(p.Operation, OutcomeRetried)
			continue
		}
		return resp, err
	}
}

func (s *Store) plainTx(ctx, bg context.Context, p *Policy, fn Func) (*Response, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: p.Isolation})
	if err != nil {
		return nil, fmt.Errorf("idem: begin: %w", err)
	}
	defer tx.Rollback(bg)
	bctx := ctx
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		bctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	resp, err := fn(bctx, txOnly{tx})
	if err == nil && resp == nil {
		err = errNoResponse
	}
	if err != nil {
		return nil, err
	}
	resp.Outcome = OutcomeUnkeyed
	if !s.cacheable(resp.Status) {
		return resp, nil // rolled back by the deferred Rollback
	}
	if err := tx.Commit(bg); err != nil {
		return nil, fmt.Errorf("idem: commit: %w", err)
	}
	return resp, nil
}

// Purge deletes rows past retention (completed, or processing past their lease), in
// batches of batchSize rows (≤ 0 means 1000) until none is left or ctx ends. It returns the
// number of rows deleted. Run it periodically (a cron job, a ticker in one replica).
func (s *Store) Purge(ctx context.Context, batchSize int) (int64, error) {
	if batchSize <= 0 {
		batchSize = 1000
	}
	var total int64
	for {
		n, err := s.q.PurgeExpired(ctx, int32(batchSize))
		total += n
		if err != nil {
			return total, fmt.Errorf("idem: purge: %w", err)
		}
		if n == 0 {
			return total, nil
		}
	}
}

// StaleClaims counts processing rows past their lease: claims whose owner is gone and
// that no retry has reclaimed yet. A gauge worth alerting on when it grows.
func (s *Store) StaleClaims(ctx context.Context) (int64, error) {
	n, err := s.q.CountStaleProcessing(ctx)
	if err != nil {
		return 0, fmt.Errorf("idem: count stale claims: %w", err)
	}
	return n, nil
}

// RepeatedPayload is one request payload seen under several keys.
type RepeatedPayload struct {
	Scope       string
	Operation   string
	Fingerprint []byte // SHA-256, 32 bytes
	Keys        int64  // how many distinct keys carried it
}

// RepeatedPayloads lists payloads (operation + fingerprint) that arrived under more than
// one key in a scope within the last window, most keys first, at most limit rows (limit
// must be positive): clients that mint a new idempotency key per retry, which defeats the
// protocol.
func (s *Store) RepeatedPayloads(ctx context.Context, window time.Duration, limit int) ([]RepeatedPayload, error) {
	rows, err := s.q.DuplicatePayloads(ctx, idemdb.DuplicatePayloadsParams{SinceUs: window.Microseconds(), MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("idem: repeated payloads: %w", err)
	}
	out := make([]RepeatedPayload, len(rows))
	for i, r := range rows {
		out[i] = RepeatedPayload{Scope: r.Scope, Operation: r.Operation, Fingerprint: r.Fingerprint, Keys: r.Keys}
	}
	return out, nil
}
