package idem

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sort"
)

// Record runs visit (a generated response object's Visit method) against an in-memory
// writer and returns what it wrote.
//
// Header lines are sorted by name ([Response.Header]); Date, Content-Length, Connection,
// Transfer-Encoding and Idempotent-Replayed are dropped (the server sets them again).
// Set-Cookie is kept for the client whose request ran, but never stored, so never
// replayed ([Response.StoredHeader]). Informational statuses (1xx, e.g. 103 Early Hints)
// are not the response: they are ignored, and the headers are taken at the final status.
// A visit that writes no final status records 200, as net/http would. 101 Switching
// Protocols and codes outside 100–999 are errors (net/http would panic on the latter).
func Record(visit func(w http.ResponseWriter) error) (*Response, error) {
	rec := &recorder{header: http.Header{}}
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
	names := make([]string, 0, len(rec.snapshot))
	for n := range rec.snapshot {
		names = append(names, n)
	}
	sort.Strings(names)
	var lines []HeaderLine
	for _, n := range names {
		if unrecordedHeaders[http.CanonicalHeaderKey(n)] { // net/http sends a key as written
			continue
		}
		for _, v := range rec.snapshot[n] {
			lines = append(lines, HeaderLine{Name: n, Value: v})
		}
	}
	return &Response{Status: rec.status, Header: lines, Body: rec.body.Bytes()}, nil
}

// recorder is an http.ResponseWriter that keeps what is written, like net/http's server:
// header changes after the final WriteHeader are not part of the response. err is the
// first failure (a status that cannot be recorded), after which every Write fails.
type recorder struct {
	header   http.Header
	snapshot http.Header
	status   int
	body     bytes.Buffer
	err      error
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
	r.snapshot = r.header.Clone()
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
	return r.body.Write(b)
}
