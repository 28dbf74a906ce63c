package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"mime/multipart"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/gen/testdata/golden/bodies"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// store implements bodies' IdempotentServerInterface: each operation records what it read
// (a SHA-256 of the bytes) in a row and answers with the row.
type store struct{ calls atomic.Int32 }

func (s *store) save(ctx context.Context, tx idem.Tx, what []byte) (bodies.Created, error) {
	s.calls.Add(1)
	sum := sha256.Sum256(what)
	digest := hex.EncodeToString(sum[:])
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO saved (sha256) VALUES ($1) RETURNING id`, digest).Scan(&id)
	return bodies.Created{Id: id, Sha256: &digest}, err
}

// readParts reads a multipart body as the business method sees it: each part's name and
// bytes.
func readParts(r *multipart.Reader) ([]byte, error) {
	var b bytes.Buffer
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return b.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, err
		}
		b.WriteString(p.FormName() + "=" + string(data) + ";")
	}
}

func (s *store) UploadFile(ctx context.Context, tx idem.Tx, req bodies.UploadFileRequestObject) (bodies.UploadFileResponseObject, error) {
	data, err := readParts(req.Body)
	if err != nil {
		return nil, err
	}
	c, err := s.save(ctx, tx, data)
	return bodies.UploadFile201JSONResponse(c), err
}

func (s *store) PutBlob(ctx context.Context, tx idem.Tx, req bodies.PutBlobRequestObject) (bodies.PutBlobResponseObject, error) {
	data, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	c, err := s.save(ctx, tx, data)
	return bodies.PutBlob201JSONResponse(c), err
}

func (s *store) AddNote(ctx context.Context, tx idem.Tx, req bodies.AddNoteRequestObject) (bodies.AddNoteResponseObject, error) {
	c, err := s.save(ctx, tx, []byte(*req.Body))
	return bodies.AddNote201JSONResponse(c), err
}

func (s *store) CreateSigningKey(ctx context.Context, tx idem.Tx, req bodies.CreateSigningKeyRequestObject) (bodies.CreateSigningKeyResponseObject, error) {
	c, err := s.save(ctx, tx, nil)
	return bodies.CreateSigningKey201JSONResponse(c), err
}

func (s *store) Subscribe(ctx context.Context, tx idem.Tx, req bodies.SubscribeRequestObject) (bodies.SubscribeResponseObject, error) {
	c, err := s.save(ctx, tx, []byte(*req.Body.Email+"/"+*req.Body.Plan))
	return bodies.Subscribe201JSONResponse(c), err
}

func (s *store) AddDocument(ctx context.Context, tx idem.Tx, req bodies.AddDocumentRequestObject) (bodies.AddDocumentResponseObject, error) {
	var data []byte
	if req.MultipartBody != nil {
		var err error
		if data, err = readParts(req.MultipartBody); err != nil {
			return nil, err
		}
	}
	c, err := s.save(ctx, tx, data)
	return bodies.AddDocument201JSONResponse(c), err
}

const maxBody = 4096

func bodiesServer(t *testing.T) (*httptest.Server, *store, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE saved (id bigserial PRIMARY KEY, sha256 text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	impl := &store{}
	st := idem.NewStore(pool, idem.WithMaxBodyBytes(maxBody))
	strict := bodies.NewStrictHandlerWithOptions(bodies.NewIdempotentStrictServer(impl, st), nil, bodies.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: st.RequestErrorHandler, ResponseErrorHandlerFunc: idem.ResponseErrorHandler,
	})
	srv := httptest.NewServer(bodies.HandlerWithOptions(strict, bodies.StdHTTPServerOptions{ErrorHandlerFunc: st.RequestErrorHandler}))
	t.Cleanup(srv.Close)
	return srv, impl, pool
}

// multipartBody encodes the parts (name, file name, content) with the given boundary.
func multipartBody(t *testing.T, boundary string, parts ...[3]string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		var pw io.Writer
		var err error
		if p[1] != "" {
			pw, err = w.CreateFormFile(p[0], p[1])
		} else {
			pw, err = w.CreateFormField(p[0])
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(pw, p[2])
	}
	w.Close()
	return w.FormDataContentType(), b.String()
}

// A client that retries an upload encodes it with a new boundary: the retry replays, the
// business read the parts once, whole.
func TestMultipartRetryWithNewBoundaryReplays(t *testing.T) {
	srv, impl, pool := bodiesServer(t)
	key := map[string]string{"Idempotency-Key": "upload-1"}
	file := [3]string{"file", "report.csv", "a,b\n1,2\n"}
	purpose := [3]string{"purpose", "", "audit"}
	ct1, body1 := multipartBody(t, "first-boundary-1111", file, purpose)
	ct2, body2 := multipartBody(t, "second-boundary-2222", file, purpose)
	first := send(t, srv, "POST", "/uploads", key, ct1, body1)
	if first.status != 201 || !strings.Contains(first.body, sha("file=a,b\n1,2\n;purpose=audit;")) {
		t.Fatalf("first: %d %s (want the digest of what the business read)", first.status, first.body)
	}
	retry := send(t, srv, "POST", "/uploads", key, ct2, body2)
	if retry.status != 201 || retry.header.Get(idem.ReplayedHeader) != "true" || retry.body != first.body {
		t.Fatalf("retry with a new boundary: %d %v %s, want a replay of %s", retry.status, retry.header, retry.body, first.body)
	}
	ct3, body3 := multipartBody(t, "third", [3]string{"file", "report.csv", "a,b\n1,3\n"}, purpose)
	if other := send(t, srv, "POST", "/uploads", key, ct3, body3); other.status != 422 {
		t.Errorf("same key, other file bytes: %d %s, want 422", other.status, other.body)
	}
	if n := impl.calls.Load(); n != 1 {
		t.Errorf("business ran %d times, want 1", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM saved`); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
}

// Streamed bodies are read into memory up to WithMaxBodyBytes: past it, a 413 before any SQL.
func TestBodyOverTheLimitIs413(t *testing.T) {
	srv, impl, pool := bodiesServer(t)
	ct, big := multipartBody(t, "b", [3]string{"file", "big.bin", strings.Repeat("x", maxBody+1)})
	if r := send(t, srv, "POST", "/uploads", map[string]string{"Idempotency-Key": "big-1"}, ct, big); r.status != 413 || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("multipart over the limit: %d %v %s, want 413 problem", r.status, r.header, r.body)
	}
	if r := send(t, srv, "POST", "/blobs/b1", map[string]string{"Idempotency-Key": "big-2"}, "application/octet-stream", strings.Repeat("x", maxBody+1)); r.status != 413 {
		t.Errorf("raw body over the limit: %d %s, want 413", r.status, r.body)
	}
	if n := impl.calls.Load(); n != 0 {
		t.Errorf("business ran %d times, want 0", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Errorf("%d keys stored, want 0", n)
	}
}

// Raw bytes, text, a form in another field order, and an operation with no input at all:
// each retry replays, and the business ran once per key.
func TestOtherBodiesReplay(t *testing.T) {
	srv, impl, _ := bodiesServer(t)
	for _, c := range []struct {
		name, path, ct, first, retry, other string
	}{
		{"raw bytes", "/blobs/b1", "application/octet-stream", "\x00\x01\x02", "\x00\x01\x02", "\x00\x01\x03"},
		{"text", "/notes", "text/plain", "hello", "hello", "hello!"},
		{"form", "/subscriptions", "application/x-www-form-urlencoded", "email=a%40b.c&plan=pro", "plan=pro&email=a%40b.c", "plan=free&email=a%40b.c"},
		{"no input", "/signing-keys", "", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := impl.calls.Load()
			key := map[string]string{"Idempotency-Key": "k-" + strings.ReplaceAll(c.name, " ", "-")}
			first := send(t, srv, "POST", c.path, key, c.ct, c.first)
			retry := send(t, srv, "POST", c.path, key, c.ct, c.retry)
			if first.status != 201 || retry.status != 201 || retry.header.Get(idem.ReplayedHeader) != "true" || retry.body != first.body {
				t.Errorf("first %d %s; retry %d %v %s: want a replay", first.status, first.body, retry.status, retry.header, retry.body)
			}
			if c.other != c.first {
				if other := send(t, srv, "POST", c.path, key, c.ct, c.other); other.status != 422 {
					t.Errorf("other payload: %d %s, want 422", other.status, other.body)
				}
			}
			if n := impl.calls.Load() - before; n != 1 {
				t.Errorf("business ran %d times, want 1", n)
			}
		})
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
