package idem

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/internal/idemdb"
)

// Statements with parameters and different result columns in one flight each keep their
// own result formats, in every exec mode: pgconn's pipeline holds the formats it was
// given until the results are read (a builder shared across statements once made a
// boolean column read as the next statement's text: "unknown boolean string
// representation").
func TestFlightStatementsKeepTheirResultFormats(t *testing.T) {
	e := newEnv(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(e.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.DefaultQueryExecMode = mode
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			conn, err := pool.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			var (
				b     bool
				n     int64
				s     string
				bytes []byte
			)
			f := newFlight(conn.Conn(), wireOf(pool))
			defer f.release()
			first := f.query(idemdb.Statement{SQL: "select $1::int > 0, $2::bigint", Args: []any{int32(1), int64(7)}}, &b, &n)
			second := f.query(idemdb.Statement{SQL: "select $1::text, $2::bytea", Args: []any{"t", []byte{1, 2}}}, &s, &bytes)
			if err := f.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if first.err != nil || second.err != nil || !b || n != 7 || s != "t" || string(bytes) != "\x01\x02" {
				t.Fatalf("first: %v %v %d; second: %v %q %v", first.err, b, n, second.err, s, bytes)
			}
		})
	}
}
