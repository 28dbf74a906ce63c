package bench

import (
	"encoding/json"
	"net/http"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/examples/payments/service"
)

// bareHandler is POST /payments written by hand with no idempotency: the same account
// header, JSON body, validation against the spec (service.ValidateRequests), business
// transaction (BEGIN; INSERT the payment through the example's sqlc query; COMMIT) and
// JSON answer as the generated service.
func bareHandler(pool *pgxpool.Pool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", func(w http.ResponseWriter, r *http.Request) {
		account := r.Header.Get(service.AccountHeader)
		if account == "" {
			http.Error(w, "no account", http.StatusUnauthorized)
			return
		}
		var in api.NewPayment
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, service.DefaultMaxBodyBytes)).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		tx, err := pool.Begin(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer tx.Rollback(ctx)
		desc := pgtype.Text{}
		if in.Description != nil {
			desc = pgtype.Text{String: *in.Description, Valid: true}
		}
		p, err := db.New(tx).InsertPayment(ctx, db.InsertPaymentParams{
			AccountID: account, Amount: in.Amount, Currency: in.Currency, Description: desc,
			IdempotencyScope: account, IdempotencyKey: r.Header.Get("Idempotency-Key"),
		})
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out := api.Payment{Id: p.ID, Amount: p.Amount, Currency: p.Currency, Status: api.Succeeded, CreatedAt: p.CreatedAt.Time.UTC()}
		if p.Description.Valid {
			out.Description = &p.Description.String
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/payments/"+p.ID)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(out)
	})
	return service.ValidateRequests(mux)
}
