// Command sessions is a test server of examples/payments/reliability. Its handlers
// (oapi.gen.go, idempotent.gen.go) are generated at test time from openapi.yaml next to
// this file, and the three files are compiled with `go build -overlay` as the package
// examples/payments/reliability/internal/sessions, which exists only in the overlay.
//
// Its one operation answers 201 with a Set-Cookie header, which must never be stored nor
// replayed, and a Link header whose value holds commas, which must be replayed intact.
//
//	DATABASE_URL=... sessions -addr 127.0.0.1:0   # prints "listening on http://ADDR"
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
)

// Link is the Link header of every 201: one field value holding two links.
const Link = `</sessions/1>; rel="self", </sessions>; rel="collection"`

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "HOST:PORT to listen on")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if err := idem.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS sessions (
		id bigserial PRIMARY KEY, user_name text NOT NULL, idempotency_key text NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	strict := NewStrictHandlerWithOptions(NewIdempotentStrictServer(sessions{}, idem.NewStore(pool)), nil,
		StrictHTTPServerOptions{RequestErrorHandlerFunc: idem.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler})
	h := HandlerWithOptions(strict, StdHTTPServerOptions{ErrorHandlerFunc: idem.RequestErrorHandler})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, h))
}

type sessions struct{}

func (sessions) CreateSession(ctx context.Context, tx idem.Tx, req CreateSessionRequestObject) (CreateSessionResponseObject, error) {
	k, _ := idem.KeyFromContext(ctx)
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO sessions (user_name, idempotency_key) VALUES ($1, $2) RETURNING id`,
		req.Body.User, k.Key).Scan(&id); err != nil {
		return nil, err
	}
	cookie := fmt.Sprintf("session=secret-%d; Path=/; HttpOnly", id)
	link := Link
	resp := CreateSession201JSONResponse{Headers: CreateSession201ResponseHeaders{SetCookie: &cookie, Link: &link}}
	resp.Body.Id = id
	return resp, nil
}
