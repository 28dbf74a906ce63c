package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// claimAttempts bounds the claim phase's statements for one call: a claim, then a
// takeover or reclaim, and their re-reads when the row changes under us.
const claimAttempts = 4

// claim runs the claim phase. When it returns how the key was claimed (claimed, taken
// over, reclaimed) the call holds the claim: c.token is on the row, and the business
// transaction may already have begun with the own-row lock (c.lock). Otherwise it returns
// the answer (replay, 409, 422) or an error.
func (c *call) claim(ctx, qctx context.Context) (Outcome, *Response, error) {
	how, stmt := OutcomeClaimed, c.claimStmt
	for range claimAttempts {
		won, row, err := c.try(ctx, qctx, stmt)
		if err != nil {
			return "", nil, fmt.Errorf("idem: %s: %w", claimVerb[how], err)
		}
		if won {
			return how, nil, nil
		}
		switch {
		case row == nil: // released between our statement and our read: claim again
			how, stmt = OutcomeClaimed, c.claimStmt
		case row.Expired:
			how, stmt = OutcomeTakenOver, c.takeOverStmt
		default:
			if resp := c.answer(*row); resp != nil {
				return "", resp, nil
			}
			if how == OutcomeReclaimed {
				// Lost the reclaim: a live owner holds its row lock, or another retry won.
				return "", c.inProgress(1), nil
			}
			how, stmt = OutcomeReclaimed, c.reclaimStmt
		}
	}
	return "", c.inProgress(1), nil
}

// claimVerb names each way of claiming in errors.
var claimVerb = map[Outcome]string{
	OutcomeClaimed: "claim", OutcomeTakenOver: "take over expired key", OutcomeReclaimed: "reclaim",
}

// try sends one claim statement (claim, takeover or reclaim) under a fresh fencing token.
// won: the statement put our token on the row. Not won: row is the key's row as read
// right after (nil when there is none).
func (c *call) try(ctx, qctx context.Context, stmt func(token int64) idemdb.Statement) (won bool, row *idemdb.GetKeyRow, err error) {
	c.token = newToken()
	st := stmt(c.token)
	if c.s.claimPool == nil && c.s.hookClaimed == nil && !c.byRowID() {
		return c.tryInFlight(ctx, qctx, st)
	}
	return c.tryApart(ctx, qctx, st)
}

// byRowID reports whether the business transaction addresses the key's row by its ctid
// (under SERIALIZABLE, see LockOwnKeyAt) rather than by its primary key. The lock then
// needs the ctid the claim returns: the claim travels apart.
func (c *call) byRowID() bool { return c.p.Isolation == pgx.Serializable }

// tryInFlight sends the claim statement, its own sync (it commits on its own, so
// duplicates see it at once), BEGIN and the own-row lock in one flight on the business
// connection. When the claim is not ours, the transaction BEGIN opened is rolled back
// and the row read, in a second flight.
func (c *call) tryInFlight(ctx, qctx context.Context, st idemdb.Statement) (bool, *idemdb.GetKeyRow, error) {
	if err := c.connect(ctx); err != nil {
		return false, nil, err
	}
	f := newFlight(c.conn.Conn(), c.s.wire)
	claim := f.query(st)
	f.sync()
	c.queueBegin(f)
	if err := f.run(qctx); err != nil {
		return false, nil, err
	}
	if claim.err == nil && claim.rows == 1 {
		return true, nil, nil
	}
	c.lock = nil
	if claim.err != nil {
		c.rollback(qctx)
		return false, nil, claim.err
	}
	row, err := c.rollbackAndRead(qctx)
	return false, row, err
}

// tryApart sends the claim statement by itself: on the claim pool when there is one
// (duplicates then never take a business connection), else on the business connection.
// The business transaction begins later, in a flight of its own. It records the row's
// ctid in c.rowID.
func (c *call) tryApart(ctx, qctx context.Context, st idemdb.Statement) (bool, *idemdb.GetKeyRow, error) {
	var db idemdb.DBTX = c.s.claimPool
	if c.s.claimPool == nil {
		if err := c.connect(ctx); err != nil {
			return false, nil, err
		}
		db = c.conn
	}
	err := db.QueryRow(qctx, st.SQL, st.Args...).Scan(&c.rowID)
	if err == nil {
		return true, nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, nil, err
	}
	row, err := idemdb.New(db).GetKey(qctx, idemdb.GetKeyParams{Scope: c.scope, Key: c.key})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("read key: %w", err)
	}
	return false, &row, nil
}

// queueBegin queues BEGIN (at the policy's isolation level) and the own-row lock, and
// records the lock's step in c.lock.
func (c *call) queueBegin(f *flight) {
	begin := "begin"
	if c.p.Isolation != "" {
		begin += " isolation level " + strings.ToLower(string(c.p.Isolation))
	}
	f.exec(begin)
	lock := idemdb.LockOwnKeyParams{Scope: c.scope, Key: c.key, LeaseToken: c.token}.Statement()
	if c.byRowID() {
		lock = idemdb.LockOwnKeyAtParams{RowID: c.rowID, Scope: c.scope, Key: c.key, LeaseToken: c.token}.Statement()
	}
	c.lock = f.query(lock)
	f.sync()
}

// rollbackAndRead ends the transaction the claim's flight began and reads the key's row,
// in one flight. A nil row: there is none.
func (c *call) rollbackAndRead(ctx context.Context) (*idemdb.GetKeyRow, error) {
	f := newFlight(c.conn.Conn(), c.s.wire)
	f.exec("rollback")
	var r idemdb.GetKeyRow
	get := f.query(idemdb.GetKeyParams{Scope: c.scope, Key: c.key}.Statement(),
		&r.Operation, &r.Fingerprint, &r.Status, &r.LeaseToken, &r.ResponseStatus, &r.ResponseHeaders,
		&r.ResponseBody, &r.Expired, &r.LeaseExpired, &r.LeaseRemainingSeconds)
	if err := f.run(ctx); err != nil {
		return nil, err
	}
	if get.err != nil {
		return nil, fmt.Errorf("read key: %w", get.err)
	}
	if !get.found {
		return nil, nil
	}
	return &r, nil
}

func (c *call) claimStmt(token int64) idemdb.Statement {
	p := c.p
	return idemdb.ClaimKeyParams{
		Scope: c.scope, Key: c.key, Operation: p.Operation, Fingerprint: c.fp, LeaseToken: token,
		LeaseUs: p.lease().Microseconds(), RetentionUs: p.retention().Microseconds(),
	}.Statement()
}

func (c *call) takeOverStmt(token int64) idemdb.Statement {
	p := c.p
	return idemdb.TakeOverExpiredParams{
		Scope: c.scope, Key: c.key, Operation: p.Operation, Fingerprint: c.fp, LeaseToken: token,
		LeaseUs: p.lease().Microseconds(), RetentionUs: p.retention().Microseconds(),
	}.Statement()
}

func (c *call) reclaimStmt(token int64) idemdb.Statement {
	return idemdb.ReclaimKeyParams{
		Scope: c.scope, Key: c.key, Operation: c.p.Operation, Fingerprint: c.fp, LeaseToken: token,
		LeaseUs: c.p.lease().Microseconds(),
	}.Statement()
}

// newToken returns a fencing token: random, so that the claim's flight can carry the
// own-row lock that names it. Only its difference from the row's previous tokens matters
// (63 random bits).
func newToken() int64 { return rand.Int64() }

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
