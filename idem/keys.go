package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/idem/internal/citusdb"
	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// ErrKeyNotFound is the error of [Store.Key] for a key with no row.
var ErrKeyNotFound = errors.New("idem: no such idempotency key")

// KeyState is one key's row as [Store.Key] reads it: what a person looking into a
// complaint ("was my payment made?") needs, without the recorded body itself.
type KeyState struct {
	Scope, Key string
	// Status is "completed" (the business committed; its answer replays until ExpiresAt),
	// or "processing" for a claim row left by protocol v1 (taken over once LeasedUntil
	// passed).
	Status      string
	Operation   string
	Fingerprint []byte // SHA-256 of the request (see [Fingerprint]), 32 bytes
	// ResponseStatus, ResponseHeaders, ResponseBodyBytes: the recorded answer (status 0,
	// no headers and 0 bytes for a v1 claim). Headers as stored: ordered [name, value]
	// lines.
	ResponseStatus    int
	ResponseHeaders   [][2]string
	ResponseBodyBytes int64
	CreatedAt         time.Time
	CompletedAt       time.Time // zero for a v1 claim
	ExpiresAt         time.Time
	LeasedUntil       time.Time // v1 claims only; zero otherwise
	// Expired: past retention (a new request with this key takes it over).
	Expired bool
	// Held: a transaction holds the key's claim now (a request with this key is running).
	Held bool
}

// Key returns the row of (scope, key) and whether a request holds the key now. A key with
// no row is [ErrKeyNotFound] (Held may still be true: a first request is running; the
// returned state then has only Scope, Key and Held).
func (s *Store) Key(ctx context.Context, scope, key string) (KeyState, error) {
	st := KeyState{Scope: scope, Key: key}
	held, err := s.HeldClaims(ctx)
	if err != nil {
		return st, err
	}
	id := LockID(scope, key)
	for _, h := range held {
		if h.LockID == id {
			st.Held = true
		}
	}
	r, err := s.q.DescribeKey(ctx, idemdb.DescribeKeyParams{Scope: scope, Key: key})
	if errors.Is(err, pgx.ErrNoRows) {
		return st, ErrKeyNotFound
	}
	if err != nil {
		return st, fmt.Errorf("idem: read key: %w", err)
	}
	st.Status, st.Operation, st.Fingerprint = r.Status, r.Operation, r.Fingerprint
	st.ResponseStatus, st.ResponseBodyBytes = int(r.ResponseStatus.Int32), r.BodyBytes
	if len(r.ResponseHeaders) > 0 {
		_ = json.Unmarshal(r.ResponseHeaders, &st.ResponseHeaders) // written by us
	}
	st.CreatedAt, st.CompletedAt, st.ExpiresAt, st.LeasedUntil = r.CreatedAt.Time, r.CompletedAt.Time, r.ExpiresAt.Time, r.LeasedUntil.Time
	st.Expired = r.Expired
	return st, nil
}

// HeldClaim is one claim held now: a transaction that holds a key's lock.
type HeldClaim struct {
	// LockID is the claim's lock value ([LockID] of its scope and key; the key itself is
	// not in the database until its row is written at completion).
	LockID int64
	// PID is the holder's backend process id (pg_terminate_backend(PID) ends it and frees
	// the key), ApplicationName and ClientAddr who it is. On a Citus cluster the holder is
	// the request's session on the node it entered through: Node is that node's id
	// (pg_dist_node.nodeid) and GlobalPID its cluster-wide process id
	// (pg_terminate_backend(GlobalPID) ends it from any node), whichever node holds the
	// lock itself; both are 0 on plain PostgreSQL.
	PID             int
	Node            int
	GlobalPID       int64
	ApplicationName string
	ClientAddr      string
	// State is the holder's pg_stat_activity state: "active" (a statement runs) or "idle
	// in transaction" (waiting for its client: the business between statements, or an
	// owner gone silent).
	State string
	// Since is when the holder's transaction began; Held how long ago that was, Idle how
	// long it has been idle in transaction (0 while a statement runs).
	Since time.Time
	Held  time.Duration
	Idle  time.Duration
	// Stale: held for longer than its lease (the store's stale age, see [WithStaleAfter]).
	Stale bool
}

// HeldClaims lists the claims held now on the store's database (by any replica), oldest
// first, read from pg_locks and pg_stat_activity: every granted two-key advisory lock of
// the database (idem's claims, unless the application takes two-key advisory locks too).
// On a Citus cluster (the citus extension installed) it reads citus_locks and
// citus_stat_activity instead, so it lists the claims held on every node whichever node
// the store's pool points at. Those held past the store's stale age are marked Stale.
func (s *Store) HeldClaims(ctx context.Context) ([]HeldClaim, error) {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return nil, fmt.Errorf("idem: held claims: %w", err)
	}
	if citus {
		return s.clusterHeldClaims(ctx)
	}
	rows, err := s.q.HeldClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("idem: held claims: %w", err)
	}
	out := make([]HeldClaim, len(rows))
	for i, r := range rows {
		out[i] = s.heldClaim(r.LockID, int(r.Pid), r.ApplicationName, r.ClientAddr, r.State, r.XactStart.Time, r.HeldUs, r.IdleUs)
	}
	return out, nil
}

// clusterHeldClaims is HeldClaims on a Citus cluster.
func (s *Store) clusterHeldClaims(ctx context.Context) ([]HeldClaim, error) {
	rows, err := citusdb.New(s.pool).ClusterHeldClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("idem: held claims (Citus cluster): %w", err)
	}
	out := make([]HeldClaim, len(rows))
	for i, r := range rows {
		out[i] = s.heldClaim(r.LockID, int(r.Pid), r.ApplicationName, r.ClientAddr, r.State, r.XactStart.Time, r.HeldUs, r.IdleUs)
		out[i].Node, out[i].GlobalPID = int(r.NodeID), r.GlobalPid
	}
	return out, nil
}

// heldClaim is one row of HeldClaims; heldUs and idleUs in microseconds.
func (s *Store) heldClaim(lockID int64, pid int, app, addr, state string, since time.Time, heldUs, idleUs int64) HeldClaim {
	held := time.Duration(heldUs) * time.Microsecond
	return HeldClaim{
		LockID: lockID, PID: pid, ApplicationName: app, ClientAddr: addr,
		State: state, Since: since, Held: held, Idle: time.Duration(idleUs) * time.Microsecond,
		Stale: held >= s.staleAge(),
	}
}
