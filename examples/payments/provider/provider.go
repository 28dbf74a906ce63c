package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/provider/api"
	"github.com/idemgen/idemgen/idem"
)

// Schema is the stand-in's own table (idem.Migrate makes idempotency_keys).
const Schema = `CREATE TABLE IF NOT EXISTS provider_charges (
	id              text        PRIMARY KEY,
	idempotency_key text        NOT NULL,
	amount          bigint      NOT NULL CHECK (amount > 0),
	currency        text        NOT NULL,
	reference       text        NOT NULL,
	created_at      timestamptz NOT NULL DEFAULT now()
)`

// Setup applies idem's schema and the stand-in's table (both re-runnable).
func Setup(ctx context.Context, pool *pgxpool.Pool) error {
	if err := idem.Migrate(ctx, pool); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, Schema)
	return err
}

// New returns the stand-in's handler on pool: POST /charges under the idempotency
// protocol (one charge per key; a retry with the key replays it).
func New(pool *pgxpool.Pool, logf func(format string, args ...any)) http.Handler {
	store := idem.NewStore(pool, idem.WithObserver(func(op string, o idem.Outcome) {
		if o == idem.OutcomeReplayed && logf != nil {
			logf("%s: replayed a charge", op) // the tests count these
		}
	}))
	responseError := idem.NewResponseErrorHandler(func(r *http.Request, err error) {
		if logf != nil {
			logf("%s %s: %v", r.Method, r.URL.Path, err)
		}
	})
	strict := api.NewStrictHandlerWithOptions(api.NewIdempotentStrictServer(charges{}, store), nil,
		api.StrictHTTPServerOptions{
			RequestErrorHandlerFunc:  store.RequestErrorHandler,
			ResponseErrorHandlerFunc: responseError,
		})
	return api.HandlerWithOptions(strict, api.StdHTTPServerOptions{ErrorHandlerFunc: store.RequestErrorHandler})
}

// charges implements api.IdempotentServerInterface.
type charges struct{}

// CreateCharge records the charge in the protocol's transaction.
func (charges) CreateCharge(ctx context.Context, tx idem.Tx, req api.CreateChargeRequestObject) (api.CreateChargeResponseObject, error) {
	key, ok := idem.KeyFromContext(ctx)
	if !ok {
		return nil, errors.New("createCharge: no idempotency key")
	}
	b := req.Body
	if b.Amount <= 0 || b.Currency == "" {
		return nil, fmt.Errorf("createCharge: amount %d %q", b.Amount, b.Currency)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	c := api.Charge{Id: "ch_" + hex.EncodeToString(id[:]), Amount: b.Amount, Currency: b.Currency, Reference: b.Reference}
	if _, err := tx.Exec(ctx, `INSERT INTO provider_charges (id, idempotency_key, amount, currency, reference) VALUES ($1, $2, $3, $4, $5)`,
		c.Id, key.Key, c.Amount, c.Currency, c.Reference); err != nil {
		return nil, fmt.Errorf("insert charge: %w", err)
	}
	return api.CreateCharge201JSONResponse(c), nil
}
