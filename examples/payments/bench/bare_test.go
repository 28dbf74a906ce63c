package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/examples/payments/service"
)

// txProtocol is how a hand-written handler wraps its business INSERT: begin opens the
// transaction on the connection, commit ends it given the answer's JSON.
type txProtocol interface {
	begin(ctx context.Context, conn *pgx.Conn, r *http.Request, body []byte) error
	commit(ctx context.Context, conn *pgx.Conn, answer []byte) error
}

// bare is no idempotency: BEGIN, the business INSERT, COMMIT.
type bare struct{}

func (bare) begin(ctx context.Context, conn *pgx.Conn, _ *http.Request, _ []byte) error {
	_, err := conn.Exec(ctx, "BEGIN")
	return err
}

func (bare) commit(ctx context.Context, conn *pgx.Conn, _ []byte) error {
	_, err := conn.Exec(ctx, "COMMIT")
	return err
}

// bareHandler is POST /payments written by hand with no idempotency: the same account
// header, JSON body, validation against the spec (service.ValidateRequests), business
// transaction (BEGIN; INSERT the payment through the example's sqlc query; COMMIT) and
// JSON answer as the generated service.
func bareHandler(pool *pgxpool.Pool) http.Handler {
	return handWritten(pool, func() txProtocol { return bare{} })
}

// handWritten is POST /payments by hand: the account header, the JSON body, the business
// INSERT wrapped by a new txProtocol per request, and the JSON answer, behind the same
// request validation as the generated service.
func handWritten(pool *pgxpool.Pool, newTx func() txProtocol) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", func(w http.ResponseWriter, r *http.Request) {
		account := r.Header.Get(service.AccountHeader)
		if account == "" {
			http.Error(w, "no account", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, service.DefaultMaxBodyBytes))
		var in api.NewPayment
		if err == nil {
			err = json.Unmarshal(body, &in)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, answer, err := insertPayment(r.Context(), pool, newTx(), r, body, in)
		var replay floorReplay
		switch {
		case errors.Is(err, errFloorBusy):
			w.Header().Set("Retry-After", "1")
			http.Error(w, "in progress", http.StatusConflict)
			return
		case isUniqueViolation(err):
			// A duplicate whose snapshot predated the owner's commit (READ COMMITTED): the
			// key's row, or the payment's unique key, catches it; idem answers it from the
			// winner's row, the floor with a 409.
			w.Header().Set("Retry-After", "1")
			http.Error(w, "in progress", http.StatusConflict)
			return
		case errors.As(err, &replay):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(replay.body)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/payments/"+id)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	})
	return service.ValidateRequests(mux)
}

// insertPayment runs tx.begin, the example's sqlc INSERT and tx.commit on one connection
// of pool (ROLLBACK on failure), and returns the payment's id and the answer's JSON.
func insertPayment(ctx context.Context, pool *pgxpool.Pool, tx txProtocol, r *http.Request, body []byte, in api.NewPayment) (string, []byte, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return "", nil, err
	}
	defer conn.Release()
	id, answer, err := runBusiness(ctx, conn.Conn(), tx, r, body, in)
	if err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return id, answer, err
}

func runBusiness(ctx context.Context, conn *pgx.Conn, tx txProtocol, r *http.Request, body []byte, in api.NewPayment) (string, []byte, error) {
	if err := tx.begin(ctx, conn, r, body); err != nil {
		return "", nil, err
	}
	desc := pgtype.Text{}
	if in.Description != nil {
		desc = pgtype.Text{String: *in.Description, Valid: true}
	}
	account := r.Header.Get(service.AccountHeader)
	p, err := db.New(conn).InsertPayment(ctx, db.InsertPaymentParams{
		AccountID: account, Amount: in.Amount, Currency: in.Currency, Description: desc,
		IdempotencyScope: account, IdempotencyKey: r.Header.Get("Idempotency-Key"),
	})
	if err != nil {
		return "", nil, err
	}
	out := api.Payment{Id: p.ID, Amount: p.Amount, Currency: p.Currency, Status: api.Succeeded, CreatedAt: p.CreatedAt.Time.UTC()}
	if p.Description.Valid {
		out.Description = &p.Description.String
	}
	answer, err := json.Marshal(out)
	if err != nil {
		return "", nil, err
	}
	answer = append(answer, '\n') // as json.Encoder writes it, and the generated server
	return p.ID, answer, tx.commit(ctx, conn, answer)
}

// isUniqueViolation reports a unique violation (23505).
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
