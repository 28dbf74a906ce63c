package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// DefaultMaxResponseBytes is the largest response body recorded by default: 1 MiB. The
// answer to a state-changing call is typically a small JSON document (a few KiB); 1 MiB
// leaves room for much more while bounding what one request holds in memory and what one
// key row stores and replays. [WithMaxResponseBytes] sets another cap.
const DefaultMaxResponseBytes int64 = 1 << 20

// ErrResponseTooLarge is wrapped by the error of a recording whose body grew past the cap
// ([DefaultMaxResponseBytes], or [WithMaxResponseBytes]): the recorder's Write returns it,
// [Record] and [Store.Record] return it, and [Store.Do] fails the call with it. The call
// fails closed: the business transaction is rolled back (the claim with it), and the
// client gets a 500 ([ResponseErrorHandler]); a partial body is never stored.
var ErrResponseTooLarge = errors.New("idem: response body over the recording cap")

// WithMaxResponseBytes caps the response body a business function may record, in bytes
// (default [DefaultMaxResponseBytes]). [Store.Record] stops buffering there, and
// [Store.Do] fails a call whose response body is longer, however it was built (see
// [ErrResponseTooLarge]). It panics when n is not positive.
func WithMaxResponseBytes(n int64) Option {
	if n <= 0 {
		panic(fmt.Sprintf("idem.WithMaxResponseBytes(%d): the cap must be positive (leave the option out for the default, %d)", n, DefaultMaxResponseBytes))
	}
	return func(s *Store) { s.maxResponseBytes = n }
}

// maxResponse is the store's response cap, in bytes.
func (s *Store) maxResponse() int64 {
	if s.maxResponseBytes > 0 {
		return s.maxResponseBytes
	}
	return DefaultMaxResponseBytes
}

// capResponse makes a response body over the store's cap an error of fn, so the call
// fails closed (rolled back) whatever built the response.
func (s *Store) capResponse(fn Func) Func {
	return func(ctx context.Context, tx Tx) (*Response, error) {
		resp, err := fn(ctx, tx)
		if err == nil && resp != nil && int64(len(resp.Body)) > s.maxResponse() {
			return nil, fmt.Errorf("%w: %d bytes, the cap is %d", ErrResponseTooLarge, len(resp.Body), s.maxResponse())
		}
		return resp, err
	}
}

// Record runs visit (a generated response object's Visit method) against an in-memory
// writer and returns what it wrote, with a body of at most [DefaultMaxResponseBytes]
// (past it the writer's Write fails and Record returns an error wrapping
// [ErrResponseTooLarge], whatever visit returned). [Store.Record] records under the
// store's own cap.
//
// Header lines are sorted by name ([Response.Header]); Date, Content-Length, Connection,
// Transfer-Encoding and Idempotent-Replayed are dropped (the server sets them again).
// Set-Cookie is kept for the client whose request ran, but never stored, so never
// replayed ([Response.StoredHeader]). Informational statuses (1xx, e.g. 103 Early Hints)
// are not the response: they are ignored, and the headers are taken at the final status.
// A visit that writes no final status records 200, as net/http would. 101 Switching
// Protocols and codes outside 100–999 are errors (net/http would panic on the latter).
func Record(visit func(w http.ResponseWriter) error) (*Response, error) {
	return record(visit, DefaultMaxResponseBytes)
}

// Record is the package-level [Record] with the store's cap ([WithMaxResponseBytes])
// instead of [DefaultMaxResponseBytes]. The generated code records with it.
func (s *Store) Record(visit func(w http.ResponseWriter) error) (*Response, error) {
	return record(visit, s.maxResponse())
}

func record(visit func(w http.ResponseWriter) error, maxBody int64) (*Response, error) {
	rec := &recorder{header: http.Header{}, max: maxBody}
	err := visit(rec)
	if rec.err != nil && !errors.Is(err, rec.err) {
		err = rec.err // a visit that swallowed the writer's error still fails
	}
	if err != nil {
		return nil, err
	}
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK) // headers set without a write are sent, as net/http does
	}
	return &Response{Status: rec.status, Header: rec.lines, Body: rec.body.Bytes()}, nil
}

// headerLines returns h's lines, sorted by name (bytewise, as written), each name's
// values in order, without the unrecorded fields; nil when none is left.
func headerLines(h http.Header) []HeaderLine {
	var small [8]string
	names, n := small[:0], 0
	for name, vs := range h {
		if unrecordedHeaders[http.CanonicalHeaderKey(name)] { // net/http sends a key as written
			continue
		}
		names, n = append(names, name), n+len(vs)
	}
	if n == 0 {
		return nil
	}
	slices.Sort(names)
	lines := make([]HeaderLine, 0, n)
	for _, name := range names {
		for _, v := range h[name] {
			lines = append(lines, HeaderLine{Name: name, Value: v})
		}
	}
	return lines
}

// recorder is an http.ResponseWriter that keeps what is written, like net/http's server:
// header changes after the final WriteHeader are not part of the response (its lines are
// taken then). Its body holds
// at most max bytes; err is the first failure (body over max, a status that cannot be
// recorded), after which every Write fails.
type recorder struct {
	header http.Header
	lines  []HeaderLine // the header at the final status (headerLines)
	status int
	body   bytes.Buffer
	max    int64
	err    error
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status != 0 || r.err != nil {
		return
	}
	switch {
	case code < 100 || code > 999:
		r.err = fmt.Errorf("idem: response status %d is not a valid status code", code)
		return
	case code == http.StatusSwitchingProtocols:
		r.err = errors.New("idem: response status 101 Switching Protocols cannot be recorded and replayed")
		return
	case code < 200:
		// Informational (100, 102, 103 Early Hints): sent ahead of the response by a
		// server, never the answer itself. Not recorded, and the headers are taken later.
		return
	}
	r.status = code
	r.lines = headerLines(r.header)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.status == 0 {
		if r.header.Get("Content-Type") == "" {
			r.header.Set("Content-Type", http.DetectContentType(b))
		}
		r.WriteHeader(http.StatusOK)
	}
	if int64(r.body.Len())+int64(len(b)) > r.max {
		r.err = fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, r.max)
		r.body = bytes.Buffer{} // nothing of it is used: let it go
		return 0, r.err
	}
	return r.body.Write(b)
}
