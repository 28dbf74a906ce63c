package idem

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// ownerMap holds the keys this process's calls hold now (by lock value), so that a
// duplicate in the same process waits for its owner without a connection, wakes the
// moment the owner's transaction ends, and, when the owner committed, answers from the
// key's row the owner committed without reading it back.
type ownerMap struct {
	mu   sync.Mutex
	keys map[int64]*owner
}

type owner struct {
	holders int           // calls that registered (a lock collision can make it 2)
	waiting int           // duplicates that waited for it (tests read it)
	done    chan struct{} // closed when the last holder is done
	// committed are the key's rows the holders committed, by (scope, key): a lock
	// collision shares the entry between two keys. Written before done is closed.
	committed []committedKey
}

// committedKey is a key's row as its owner committed it.
type committedKey struct {
	scope, key string
	row        keyRow
}

// holding registers c as the owner of its key for the length of its transaction, and
// records the policy's idle bound for StaleClaims. The returned func unregisters it,
// handing the key's row c committed (if it did) to the duplicates waiting for it.
func (s *Store) holding(c *call) func() {
	if d := int64(c.p.idleBound()); d > s.longestHold.Load() {
		s.longestHold.Store(d) // a race may keep a shorter one a while: a gauge's threshold
	}
	if c.p.Wait <= 0 {
		return func() {}
	}
	m := &s.owners
	m.mu.Lock()
	if m.keys == nil {
		m.keys = map[int64]*owner{}
	}
	o := m.keys[c.lockID]
	if o == nil {
		o = &owner{done: make(chan struct{})}
		m.keys[c.lockID] = o
	}
	o.holders++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if c.committed != nil {
			o.committed = append(o.committed, committedKey{c.scope, c.key, *c.committed})
		}
		if o.holders--; o.holders == 0 {
			delete(m.keys, c.lockID)
			close(o.done)
		}
		m.mu.Unlock()
	}
}

// localOwner returns the key's owner in this process, if any, counting the caller among
// its waiting duplicates.
func (s *Store) localOwner(id int64) *owner {
	m := &s.owners
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.keys[id]
	if o != nil {
		o.waiting++
	}
	return o
}

// rowFor is the row o's holders committed for (scope, key), if any; read once done is
// closed.
func (o *owner) rowFor(scope, key string) *keyRow {
	for i := range o.committed {
		if k := &o.committed[i]; k.scope == scope && k.key == key {
			return &k.row
		}
	}
	return nil
}

// pollInterval is how often a waiting duplicate whose owner runs elsewhere tries the key
// again when every database waiter slot is taken.
const pollInterval = 50 * time.Millisecond

// await waits, until at most `until`, for the transaction that holds c's key to end.
// ended is false when the wait is over (or ctx ended) first. The owner in this process: a
// channel, no connection, and row is the key's row the owner committed (nil when it rolled
// back: claim again). Elsewhere: in the database (AwaitKey under lock_timeout), in one of
// the store's bounded waiter slots, else by polling; row is nil (claim again, which
// replays the owner's answer).
func (s *call) await(ctx context.Context, until time.Time) (ended bool, row *keyRow) {
	left := time.Until(until)
	if left <= 0 || ctx.Err() != nil {
		return false, nil
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	if o := s.s.localOwner(s.lockID); o != nil {
		select {
		case <-o.done:
			return true, o.rowFor(s.scope, s.key)
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, nil
		}
	}
	select {
	case s.s.waiters <- struct{}{}:
		defer func() { <-s.s.waiters }()
		return s.awaitInDatabase(ctx, left), nil
	default:
	}
	poll := time.NewTimer(min(pollInterval, left))
	defer poll.Stop()
	select {
	case <-poll.C:
		return true, nil // try again; the loop comes back here while the key is held
	case <-timer.C:
		return false, nil
	case <-ctx.Done():
		return false, nil
	}
}

// awaitInDatabase blocks on the key's lock (AwaitKey) for at most left, in a READ
// COMMITTED transaction of its own that it rolls back: true when the lock was granted (the
// owner's transaction ended).
func (c *call) awaitInDatabase(ctx context.Context, left time.Duration) bool {
	if err := c.connect(ctx); err != nil {
		return false
	}
	defer c.dropConn()
	fctx, cancel := context.WithTimeout(ctx, left+c.s.flightTimeout)
	defer cancel()
	f := newFlight(c.conn.Conn(), c.s.wire)
	defer f.release()
	f.exec("begin isolation level read committed")
	f.exec("set local lock_timeout = " + strconv.FormatInt(max(1, left.Milliseconds()), 10))
	hi, lo := lockHalves(c.lockID)
	var r idemdb.AwaitKeyRow
	wait := f.query(idemdb.AwaitKeyParams{LockHi: hi, LockLo: lo, Scope: c.scope, Key: c.key}.Statement(),
		&r.Granted, &r.Present)
	f.sync()
	f.exec("rollback")
	if err := f.run(fctx); err != nil {
		return false
	}
	return wait.err == nil && r.Granted
}
