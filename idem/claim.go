package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// lockDomain starts the encoding the claim's lock is hashed from, so that idem's lock
// values are not those of another scheme that hashes the same strings.
const lockDomain = "idemgen/v2 claim\x00"

// LockID returns the 64-bit value of the transaction-scoped advisory lock that claims
// (scope, key): the first 8 bytes (big-endian) of SHA-256 over an unambiguous encoding,
// a domain prefix, the scope's length as a uvarint, the scope, then the key (the last
// field needs no length). Text cannot hold NUL but keys and scopes may hold any other
// byte, so a separator alone would be ambiguous; the length prefix is not. The lock is
// taken as pg_try_advisory_xact_lock(int4, int4) with the high and the low 32 bits, and
// shows in pg_locks as classid, objid with objsubid 2.
func LockID(scope, key string) int64 {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte(lockDomain))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(scope)))])
	h.Write([]byte(scope))
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return int64(binary.BigEndian.Uint64(h.Sum(sum[:0])[:8]))
}

// lockHalves splits a lock value into the two int4 keys of the advisory lock functions.
func lockHalves(id int64) (hi, lo int32) { return int32(id >> 32), int32(id) }

// claimState is what the claim's flight found.
type claimState int

const (
	claimFresh    claimState = iota // lock taken, no row: the key is ours
	claimTakeover                   // lock taken, a takeable row (past retention, or a v1 claim past its lease)
	claimAnswered                   // the row (or the lock held elsewhere) decides the answer
	claimBusy                       // another transaction holds the lock
)

// claim sends the first flight on the business connection: BEGIN (at the policy's
// isolation), the lease's idle bound, LockKey and GetKey (under SERIALIZABLE, LockKeyOnly
// alone). When the key is ours the transaction stays open (claimFresh, claimTakeover);
// otherwise it is rolled back and resp is the answer (replay, 409, 422), or, for
// claimBusy, nil (the caller answers 409 or waits).
//
// The flight reads the key's row twice. LockKey takes the lock in a statement that reads
// the row (so that with the table distributed by scope, the lock is taken on the node that
// holds the key's shard), but that statement's snapshot is taken before its lock is
// granted: an owner that committed the key's row in between (releasing the lock) is
// invisible to it, and a fresh claim would run the business a second time (its
// writes rolled back by the primary key at completion, but its calls made: a 50-duplicate
// burst behind PgBouncer hit it). GetKey, the next statement of the same flight, takes its
// snapshot under READ COMMITTED after the lock is held, and its row decides; under
// REPEATABLE READ it reads the transaction's snapshot, as LockKey did, and ClaimKeyRow
// settles it. The price: one statement more, no round trip more.
func (c *call) claim(ctx context.Context) (claimState, *Response, error) {
	if err := c.connect(ctx); err != nil {
		return 0, nil, err
	}
	conn := c.conn.Conn()
	// The flight runs under the request's context (a client gone cancels it) and the
	// flight timeout, a socket deadline (flightDeadline).
	fctx, d := c.s.boundFlights(ctx, conn)
	defer d.end()
	f := newFlight(conn, c.s.wire)
	defer f.release()
	idle := c.p.idleBound()
	session := c.s.wire.prepare && !c.s.pooler // the session is ours: set the bound on it once
	if session && sessionIdle(conn) != idle {
		// Once per connection (and per change): the bound lives in the session, so the
		// steady state costs no statement. Its own sync: a SET inside the transaction
		// would be undone by a rollback.
		f.exec("set idle_in_transaction_session_timeout = " + strconv.FormatInt(idle.Milliseconds(), 10))
		f.sync()
	}
	f.exec(c.beginSQL())
	if !session {
		// Behind PgBouncer's transaction pooling the session is not ours: every
		// transaction sets its own bound.
		f.exec("set local idle_in_transaction_session_timeout = " + strconv.FormatInt(idle.Milliseconds(), 10))
	}
	hi, lo := lockHalves(c.lockID)
	c.rowClaimed = false
	if c.p.Isolation == "" && defaultIsolation(conn) == "" {
		// The connection's first claim under a policy that names no level: learn the
		// session's default first (one round trip, once per connection). Guessing it
		// would read the key's row under SERIALIZABLE when that is the default, and its
		// predicate lock on the primary key's page would fail the completions of the
		// other keys on that page with 40001.
		var level string
		if err := conn.QueryRow(fctx, "show default_transaction_isolation").Scan(&level); err != nil {
			return 0, nil, fmt.Errorf("idem: claim: read the default isolation: %w", d.err(err))
		}
		setDefaultIsolation(conn, level)
	}
	serial := c.p.Isolation == pgx.Serializable || c.p.Isolation == "" && defaultIsolation(conn) == "serializable"
	if serial {
		citus, err := c.s.citusCached(fctx, conn)
		if err != nil {
			return 0, nil, fmt.Errorf("idem: claim: %w", d.err(err))
		}
		if citus {
			return 0, nil, ErrSerializableOnCitus
		}
	}
	r, k := &c.lockRow, &c.keyRow // the call's: their fields are scan targets
	*r, *k = idemdb.LockKeyRow{}, idemdb.GetKeyRow{}
	var lock, read *step
	if serial {
		lock = f.query(idemdb.LockKeyOnlyParams{LockHi: hi, LockLo: lo}.Statement(), &r.Locked, &r.Isolation)
	} else {
		lock = f.query(idemdb.LockKeyParams{LockHi: hi, LockLo: lo, Scope: c.scope, Key: c.key}.Statement(),
			&r.Locked, &r.Isolation, &r.Present)
		// The key's row again, in a statement of its own: under READ COMMITTED its
		// snapshot is taken once LockKey's lock is held.
		read = f.query(idemdb.GetKeyParams{Scope: c.scope, Key: c.key}.Statement(),
			&k.Operation, &k.Fingerprint, &k.Status, &k.ResponseStatus, &k.ResponseHeaders,
			&k.ResponseBody, &k.Takeable, &k.LeaseRemainingSeconds)
	}
	if err := f.run(fctx); err != nil {
		return 0, nil, fmt.Errorf("idem: claim: %w", d.err(err))
	}
	if session {
		setSessionIdle(conn, idle)
	}
	if err := firstErr(lock, read); err != nil {
		c.rollback(ctx)
		return 0, nil, fmt.Errorf("idem: claim: %w", err)
	}
	c.snapshot = r.Isolation == "repeatable read" || r.Isolation == "serializable"
	found := read != nil && read.found
	switch {
	case found && !k.Takeable:
		// A row that is not ours to take answers, whoever holds the lock: concurrent
		// replays of a completed key do not make each other 409.
	case !r.Locked && serial:
		// LockKeyOnly read no row: a completed key still replays.
		return c.answerIfCompleted(ctx)
	case !r.Locked:
		c.rollback(ctx)
		return claimBusy, nil, nil
	case serial || r.Isolation == "serializable":
		// The row was not read (or read under a snapshot older than the lock):
		// ClaimKeyRow decides.
		return c.claimSerializable(ctx)
	case !found:
		return claimFresh, nil, nil
	default:
		return claimTakeover, nil, nil
	}
	c.rollback(ctx)
	return claimAnswered, c.answer(committedRow(*k)), nil
}

// firstErr is the first error of the steps that were queued (nil ones are skipped).
func firstErr(steps ...*step) error {
	for _, s := range steps {
		if s != nil && s.err != nil {
			return s.err
		}
	}
	return nil
}

// committedRow is the key's row as GetKey read it.
func committedRow(r idemdb.GetKeyRow) keyRow {
	return keyRow{
		operation: r.Operation, fingerprint: r.Fingerprint, status: r.Status,
		responseStatus: int(r.ResponseStatus.Int32), headers: r.ResponseHeaders, body: r.ResponseBody,
		leaseRemaining: r.LeaseRemainingSeconds,
	}
}

// answerIfCompleted answers a request whose key another transaction holds under
// SERIALIZABLE: from the key's row when it is one that answers (a completed key being
// replayed by the holder), else busy.
func (c *call) answerIfCompleted(ctx context.Context) (claimState, *Response, error) {
	r, err := c.getKey(ctx)
	c.rollback(ctx)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || err == nil && r.Takeable:
		return claimBusy, nil, nil
	case err != nil:
		return 0, nil, fmt.Errorf("idem: read the key's row: %w", err)
	}
	return claimAnswered, c.answer(committedRow(r)), nil
}

// claimSerializable finishes the claim under SERIALIZABLE, the lock held: ClaimKeyRow
// writes the key's row (fresh, or over a takeable one) before the business, and when it
// writes nothing the row is read and answers.
func (c *call) claimSerializable(ctx context.Context) (claimState, *Response, error) {
	if retry, err := c.claimRow(ctx); err != nil {
		if !retry || retryable(err) {
			c.rollback(ctx)
			return 0, nil, err
		}
		// A row not ours to take: read it.
		r, err := c.getKey(ctx)
		c.rollback(ctx)
		if err != nil {
			return 0, nil, fmt.Errorf("idem: read the key's row: %w", err)
		}
		return claimAnswered, c.answer(committedRow(r)), nil
	}
	c.rowClaimed = true
	return claimFresh, nil, nil
}

// getKey reads the key's row (GetKey) in the call's transaction, within a flight's
// deadline.
func (c *call) getKey(ctx context.Context) (idemdb.GetKeyRow, error) {
	fctx, d := c.s.boundFlights(ctx, c.conn.Conn())
	defer d.end()
	r, err := idemdb.New(c.conn).GetKey(fctx, idemdb.GetKeyParams{Scope: c.scope, Key: c.key})
	return r, d.err(err)
}

// beginSQL is BEGIN at the policy's isolation level.
func (c *call) beginSQL() string {
	if c.p.Isolation == "" {
		return "begin"
	}
	return "begin isolation level " + strings.ToLower(string(c.p.Isolation))
}

// claimRow writes the key's row as 'processing' inside the transaction (ClaimKeyRow), before
// the business runs under REPEATABLE READ or SERIALIZABLE: the transaction's snapshot was
// taken before the lock was granted, and this write surfaces a row committed in between
// (40001, or no row written). retry: roll back and run the request again.
func (c *call) claimRow(ctx context.Context) (retry bool, err error) {
	fctx, d := c.s.boundFlights(ctx, c.conn.Conn())
	n, err := idemdb.New(c.conn).ClaimKeyRow(fctx, idemdb.ClaimKeyRowParams{
		Scope: c.scope, Key: c.key, Operation: c.p.Operation, Fingerprint: c.fp,
		RetentionUs: c.p.retention().Microseconds(),
	})
	d.end()
	err = d.err(err)
	switch {
	case retryable(err):
		return true, err
	case err != nil:
		return false, fmt.Errorf("idem: claim the key's row: %w", err)
	case n != 1:
		return true, fmt.Errorf("idem: claim the key's row: a row committed since the snapshot holds the key")
	}
	return false, nil
}

// keyRow is the key's row as the claim (or a read after a lost completion) found it.
type keyRow struct {
	operation, status string
	fingerprint       []byte
	responseStatus    int
	headers           json.RawMessage
	body              []byte
	leaseRemaining    float64 // seconds left of a v1 claim's lease
}

// answer decides a request whose key has a row that is not ours to take: 422, a replay,
// or, for a v1 claim whose lease has not ended, 409.
func (c *call) answer(row keyRow) *Response {
	p := c.p
	switch {
	case row.operation != p.Operation:
		return c.s.reject(p, OutcomeMismatch, http.StatusUnprocessableEntity,
			fmt.Sprintf("this idempotency key was used for another operation (%s)", row.operation), 0)
	case !bytes.Equal(row.fingerprint, c.fp):
		return c.s.reject(p, OutcomeMismatch, http.StatusUnprocessableEntity,
			"this idempotency key was used with a different request payload", 0)
	case row.status == "completed":
		resp := &Response{Status: row.responseStatus, Body: row.body, Outcome: OutcomeReplayed}
		if resp.Body == nil {
			resp.Body = []byte{}
		}
		if err := json.Unmarshal(row.headers, &resp.Header); err != nil {
			resp.Header = nil // written by us; a broken value replays without headers
		}
		c.s.observe(p.Operation, OutcomeReplayed)
		return resp
	}
	// A v1 claim whose owner may still run: its lease ends it.
	return c.inProgress(int(math.Ceil(row.leaseRemaining)))
}

// inProgress answers 409 with Retry-After: seconds, clamped to 1 and to the longest the
// owner can hold the key (its timeout, else its lease): [liveOwnerRetryAfter] for a key a
// running transaction holds, the lease's seconds left for a v1 claim row.
func (c *call) inProgress(seconds int) *Response {
	maxS := int(math.Ceil(c.p.idleBound().Seconds()))
	if c.p.Timeout > 0 {
		maxS = min(maxS, int(math.Ceil(c.p.Timeout.Seconds())))
	}
	seconds = max(1, min(seconds, maxS))
	return c.s.reject(c.p, OutcomeInProgress, http.StatusConflict,
		"a request with this idempotency key is being processed; retry later", seconds)
}

// sessionIdleKey is the connection's custom data entry holding the
// idle_in_transaction_session_timeout idem set on its session.
const sessionIdleKey = "idem.idle_in_transaction_session_timeout"

func sessionIdle(conn *pgx.Conn) time.Duration {
	d, _ := conn.PgConn().CustomData()[sessionIdleKey].(time.Duration)
	return d
}

func setSessionIdle(conn *pgx.Conn, d time.Duration) { conn.PgConn().CustomData()[sessionIdleKey] = d }

// defaultIsolationKey is the connection's custom data entry holding the isolation level its
// transactions get when BEGIN names none, as the claim's statement last reported it.
const defaultIsolationKey = "idem.default_isolation"

func defaultIsolation(conn *pgx.Conn) string {
	s, _ := conn.PgConn().CustomData()[defaultIsolationKey].(string)
	return s
}

func setDefaultIsolation(conn *pgx.Conn, s string) {
	if defaultIsolation(conn) != s {
		conn.PgConn().CustomData()[defaultIsolationKey] = s
	}
}
