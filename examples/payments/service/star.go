package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemredis"
)

// StarPayment counts a star for the payment: a like-style operation whose idempotency keys
// live in Redis (store: redis in openapi.yaml), so it gets no transaction. Its one
// statement commits on its own before it returns, and only then does the Redis store
// complete the key: a lost completion can make a retry count the star again, never
// replay a star that was not counted.
//
// The statement is an INSERT ... SELECT (the star is counted only for a payment of the
// account), sent in the simple protocol: Citus routes it to the account's shard with its
// values in its text, but cannot plan it generically with parameters (db.SimpleProtocol).
func (s *server) StarPayment(ctx context.Context, req api.StarPaymentRequestObject) (api.StarPaymentResponseObject, error) {
	if s.beforeStar != nil {
		if err := s.beforeStar(ctx); err != nil {
			return nil, fmt.Errorf("star payment: %w", err)
		}
	}
	row, err := db.New(db.SimpleProtocol(s.pool)).StarPayment(ctx, db.StarPaymentParams{ID: req.Id, AccountID: mustAccount(ctx)})
	if errors.Is(err, pgx.ErrNoRows) {
		return api.StarPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: notFound(req.Id)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("star payment: %w", err)
	}
	return api.StarPayment200JSONResponse{PaymentId: row.PaymentID, Stars: row.Stars}, nil
}

// withoutRedis is the server of a service started without a Redis store
// (Options.Redis nil): the operations on Redis answer 503, the others run.
type withoutRedis struct{ api.StrictServerInterface }

func (withoutRedis) StarPayment(context.Context, api.StarPaymentRequestObject) (api.StarPaymentResponseObject, error) {
	detail := "this server runs without Redis, the idempotency key store of starPayment; nothing was counted"
	retry := 60
	return api.StarPayment503ApplicationProblemPlusJSONResponse{
		Body:    api.Problem{Title: http.StatusText(http.StatusServiceUnavailable), Status: http.StatusServiceUnavailable, Detail: &detail},
		Headers: api.StarPayment503ResponseHeaders{RetryAfter: &retry},
	}, nil
}

// NewRedisStore returns the idempotency store of the operations marked store: redis, on
// rdb, with the service's scope (the account) and observer: pass it as Options.Redis. It
// fails when the server's maxmemory-policy may evict keys (idemredis.ErrEvictingPolicy)
// or cannot be reached.
func NewRedisStore(ctx context.Context, rdb redis.UniversalClient, observer idem.Observer) (*idemredis.Store, error) {
	opts := []idemredis.Option{idemredis.WithScope(scope)}
	if observer != nil {
		opts = append(opts, idemredis.WithObserver(observer))
	}
	return idemredis.New(ctx, rdb, opts...)
}

// Sleep returns a BeforeStar that waits d (or until the request's context ends).
func Sleep(d time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
