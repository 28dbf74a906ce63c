package idem

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

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

// StaleClaims counts the claims held now for longer than their lease: transactions that
// hold a key's lock (see [Store.HeldClaims]) and began longer ago than the store's stale
// age ([WithStaleAfter]; default the longest lease of the policies it has run). Read from
// the database's lock and activity views (pg_locks, pg_stat_activity), so it counts the
// claims of every replica on the database. A live owner is never cut off within its
// timeout, so a count above 0 that stays is a business running longer than its lease, or
// a lease shorter than the operation's timeout; owners that went silent are cut off by the
// database within the lease and leave the count on their own. A gauge worth alerting on.
func (s *Store) StaleClaims(ctx context.Context) (int64, error) {
	n, err := s.q.CountStaleClaims(ctx, s.staleAge().Microseconds())
	if err != nil {
		return 0, fmt.Errorf("idem: count stale claims: %w", err)
	}
	return n, nil
}

// staleAge is the age past which a held claim is stale.
func (s *Store) staleAge() time.Duration {
	if s.staleAfter > 0 {
		return s.staleAfter
	}
	if d := time.Duration(s.longestHold.Load()); d > 0 {
		return d
	}
	return DefaultLease
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
