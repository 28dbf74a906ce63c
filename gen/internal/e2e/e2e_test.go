// Package e2e runs generated code against a real PostgreSQL, served by net/http: the
// golden packages petstore (petstore-expanded.yaml with addPet marked), keyspec (keys the
// spec declares, its own error shape) and bodies (every request body kind); and served by
// chi, echo and gin: the router cases of routers_test.go, with idemgen's base and with
// oapi-codegen's own output (-base=external).
package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/gen/testdata/golden/petstore"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// pets implements the generated IdempotentServerInterface. Only AddPet is marked: it
// gets the protocol's transaction and writes through it.
type pets struct {
	calls atomic.Int32
}

func (p *pets) AddPet(ctx context.Context, tx idem.Tx, req petstore.AddPetRequestObject) (petstore.AddPetResponseObject, error) {
	p.calls.Add(1)
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO pets (name) VALUES ($1) RETURNING id`, req.Body.Name).Scan(&id); err != nil {
		return nil, err
	}
	if req.Body.Name == "fail" {
		return nil, errors.New("business failure after a write")
	}
	return petstore.AddPet200JSONResponse{Id: id, Name: req.Body.Name, Tag: req.Body.Tag}, nil
}

func (p *pets) FindPets(ctx context.Context, req petstore.FindPetsRequestObject) (petstore.FindPetsResponseObject, error) {
	return petstore.FindPets200JSONResponse{}, nil
}

func (p *pets) DeletePet(ctx context.Context, req petstore.DeletePetRequestObject) (petstore.DeletePetResponseObject, error) {
	return petstore.DeletePet204Response{}, nil
}

func (p *pets) FindPetById(ctx context.Context, req petstore.FindPetByIdRequestObject) (petstore.FindPetByIdResponseObject, error) {
	return petstore.FindPetByIddefaultJSONResponse{StatusCode: 404, Body: petstore.Error{Code: 404, Message: "not found"}}, nil
}

func setup(t *testing.T) (*httptest.Server, *pets, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE pets (id bigserial PRIMARY KEY, name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	impl := &pets{}
	h := petstore.Handler(petstore.NewStrictHandler(petstore.NewIdempotentStrictServer(impl, idem.NewStore(pool)), nil))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, impl, pool
}

type result struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, srv *httptest.Server, key, body string) result {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/pets", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return roundTrip(t, req)
}

// roundTrip sends req and reads the whole answer.
func roundTrip(t *testing.T, req *http.Request) result {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // not Fatal: called from goroutines
		return result{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, string(b)}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReplay(t *testing.T) {
	srv, impl, pool := setup(t)

	first := post(t, srv, "k-1", `{"name":"rex","tag":"dog"}`)
	if first.status != 200 || first.header.Get(idem.ReplayedHeader) != "" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
	}
	// Same key, same payload with other key order and spacing: a byte-identical replay.
	second := post(t, srv, "k-1", `{ "tag": "dog", "name": "rex" }`)
	if second.status != 200 || second.header.Get(idem.ReplayedHeader) != "true" || second.body != first.body {
		t.Fatalf("second: %d %v %q, want a replay of %q", second.status, second.header, second.body, first.body)
	}
	if got := impl.calls.Load(); got != 1 {
		t.Errorf("business ran %d times, want 1", got)
	}
	if n := count(t, pool, `SELECT count(*) FROM pets`); n != 1 {
		t.Errorf("%d pets, want 1", n)
	}

	// Same key, other payload: 422 problem, nothing run.
	mismatch := post(t, srv, "k-1", `{"name":"felix"}`)
	if mismatch.status != 422 || mismatch.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("mismatch: %d %v %s", mismatch.status, mismatch.header, mismatch.body)
	}
	// An invalid key: 400 before any SQL.
	if bad := post(t, srv, "\"unterminated", `{"name":"rex"}`); bad.status != 400 {
		t.Errorf("invalid key: %d %s", bad.status, bad.body)
	}
	// No key (optional for addPet): runs, unprotected.
	if r := post(t, srv, "", `{"name":"tom"}`); r.status != 200 || r.header.Get(idem.ReplayedHeader) != "" {
		t.Errorf("no key: %d %s", r.status, r.body)
	}
	if got := impl.calls.Load(); got != 2 {
		t.Errorf("business ran %d times, want 2", got)
	}
}

// A business error rolls its writes back and releases the key: a retry runs again.
func TestBusinessErrorReleases(t *testing.T) {
	srv, impl, pool := setup(t)
	for i := 0; i < 2; i++ {
		if r := post(t, srv, "k-fail", `{"name":"fail"}`); r.status != 500 {
			t.Fatalf("attempt %d: %d %s", i, r.status, r.body)
		}
	}
	if got := impl.calls.Load(); got != 2 {
		t.Errorf("business ran %d times, want 2 (the key was released after the first failure)", got)
	}
	if n := count(t, pool, `SELECT count(*) FROM pets`); n != 0 {
		t.Errorf("%d pets, want 0 (rolled back)", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Errorf("%d keys, want 0 (released)", n)
	}
}

// Concurrent duplicates, released together: exactly one execution, every other answer a
// 409 or a replay of it.
func TestConcurrentDuplicates(t *testing.T) {
	srv, impl, pool := setup(t)
	const n = 16
	start := make(chan struct{})
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		go func() {
			<-start
			results <- post(t, srv, "k-race", `{"name":"rex"}`)
		}()
	}
	close(start)
	var ok, conflict int
	var body string
	for i := 0; i < n; i++ {
		r := <-results
		switch {
		case r.status == 200:
			if body != "" && r.body != body {
				t.Errorf("two different 200 bodies: %q and %q", body, r.body)
			}
			body = r.body
			ok++
		case r.status == 409:
			conflict++
		default:
			t.Errorf("unexpected %d %s", r.status, r.body)
		}
	}
	if got := impl.calls.Load(); got != 1 {
		t.Errorf("business ran %d times, want 1", got)
	}
	if c := count(t, pool, `SELECT count(*) FROM pets`); c != 1 {
		t.Errorf("%d pets, want 1", c)
	}
	if ok+conflict != n || ok < 1 {
		t.Errorf("%d ok, %d conflicts", ok, conflict)
	}
}
