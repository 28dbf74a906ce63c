package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestResponseErrorHandlerLogsAndHidesTheError(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)

	w := httptest.NewRecorder()
	ResponseErrorHandler(w, httptest.NewRequest("POST", "/payments", nil), errors.New("pq: secret detail"))
	if w.Code != http.StatusInternalServerError || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("answer %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	if strings.Contains(w.Body.String(), "secret") {
		t.Fatalf("the body leaks the error: %s", w.Body)
	}
	if !strings.Contains(buf.String(), "secret detail") || !strings.Contains(buf.String(), "path=/payments") {
		t.Fatalf("log: %q", buf.String())
	}

	var logged error
	h := NewResponseErrorHandler(func(r *http.Request, err error) { logged = err })
	w = httptest.NewRecorder()
	h(w, httptest.NewRequest("POST", "/x", nil), errBusiness)
	if logged != errBusiness || w.Code != http.StatusInternalServerError {
		t.Fatalf("logged %v, answered %d", logged, w.Code)
	}
}

// The 500's detail speaks of keys only for the errors of marked operations (the
// generated layer wraps Store.Do's in DoError): an unmarked operation has no key, and
// nothing of it was necessarily rolled back.
func TestResponseErrorHandlerDetail(t *testing.T) {
	for _, c := range []struct {
		err          error
		code         int
		want, wantNo string
	}{
		{errBusiness, 500, `"the request failed"`, "idempotency key"},
		{&DoError{Err: errBusiness}, 500, "it may be retried, with the same idempotency key if it had one", ""},
		{&DoError{Err: fmt.Errorf("%w: connection reset", ErrCommitUnknown)}, 503, "outcome is unknown", "rolled back"},
		{&DoError{Err: fmt.Errorf("%w: %w", ErrPoolExhausted, context.DeadlineExceeded)}, 503, "nothing ran", "outcome is unknown"},
		// An unmarked operation past the deadline its wiring gives it; a marked one's
		// business past its timeout stays a 500 (rolled back, a retry runs).
		{fmt.Errorf("get payment: %w", context.DeadlineExceeded), 503, "within its deadline", "idempotency key"},
		{&DoError{Err: fmt.Errorf("business: %w", context.DeadlineExceeded)}, 500, "same idempotency key", "deadline"},
	} {
		w := httptest.NewRecorder()
		NewResponseErrorHandler(func(*http.Request, error) {})(w, httptest.NewRequest("POST", "/x", nil), c.err)
		body := w.Body.String()
		if w.Code != c.code || !strings.Contains(body, c.want) || (c.wantNo != "" && strings.Contains(body, c.wantNo)) {
			t.Errorf("%v: %d %s, want %d with %q and without %q", c.err, w.Code, body, c.code, c.want, c.wantNo)
		}
	}
}

func TestRequestErrorHandler(t *testing.T) {
	w := httptest.NewRecorder()
	RequestErrorHandler(w, httptest.NewRequest("POST", "/x", nil), &http.MaxBytesError{Limit: 10})
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %d, want 413", w.Code)
	}
	w = httptest.NewRecorder()
	RequestErrorHandler(w, httptest.NewRequest("POST", "/x", nil), errors.New("can't decode JSON body"))
	if w.Code != http.StatusBadRequest || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a bad request: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
}

// An unknown commit outcome is never answered "rolled back": 503, Retry-After, and a detail
// that says a retry with the same key settles it.
func TestResponseErrorHandlerUnknownCommit(t *testing.T) {
	w := httptest.NewRecorder()
	h := NewResponseErrorHandler(func(*http.Request, error) {})
	h(w, httptest.NewRequest("POST", "/x", nil), fmt.Errorf("%w: %w", ErrCommitUnknown, errors.New("unexpected EOF")))
	body := w.Body.String()
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" ||
		strings.Contains(body, "rolled back") || !strings.Contains(body, "unknown") || !strings.Contains(body, "same idempotency key") {
		t.Fatalf("answer %d Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), body)
	}
}
