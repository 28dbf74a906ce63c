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
