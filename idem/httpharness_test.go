package idem

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// serve is a generated handler's shape over real HTTP, for tests of what a client gets: the
// key from the Idempotency-Key header lines (or, with bodyKey, from the JSON body at that
// pointer, through KeyFromBody), the body as the fingerprint's part, Store.Do, then the
// response written; a key that cannot be read is a 400 problem and an error of Do a 500
// problem, as the generated code and ResponseErrorHandler answer them.
func (e *env) serve(p *Policy, bodyKey string, fn Func) *httptest.Server {
	e.t.Helper()
	answerError := NewResponseErrorHandler(func(r *http.Request, err error) { e.t.Logf("%s %s: %v", r.Method, r.URL.Path, err) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil && err != io.EOF {
			RequestErrorHandler(w, r, err)
			return
		}
		var rawKey *string
		if bodyKey != "" {
			k, err := KeyFromBody(body, bodyKey)
			if err != nil {
				WriteProblem(w, http.StatusBadRequest, err.Error())
				return
			}
			rawKey = k
		} else {
			raw, present, err := KeyFromHeader(r.Header.Values(DefaultKeyHeader))
			if err != nil {
				WriteProblem(w, http.StatusBadRequest, err.Error())
				return
			}
			if present {
				rawKey = &raw
			}
		}
		resp, err := e.store.Do(r.Context(), p, rawKey, []Part{{Name: "body", Value: body}}, fn)
		if err != nil {
			answerError(w, r, &DoError{Err: err}) // as the generated layer wraps it
			return
		}
		_ = resp.WriteTo(w)
	}))
	e.t.Cleanup(srv.Close)
	return srv
}

// answer is what a client got.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// post sends POST body to srv with the Idempotency-Key header lines given (none for a
// request without a key).
func post(t *testing.T, srv *httptest.Server, body string, keys ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/things", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		req.Header.Add(DefaultKeyHeader, k)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// isProblem reports an RFC 9457 answer with the given status.
func (a answer) isProblem(status int) bool {
	var p Problem
	return a.status == status && a.header.Get("Content-Type") == "application/problem+json" &&
		json.Unmarshal(a.body, &p) == nil && p.Status == status
}
