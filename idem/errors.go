package idem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
)

// RequestErrorHandler answers a request the generated server could not decode (bad JSON,
// a bad parameter, two values of a single-valued header) with a 400 problem, and a body
// over the limit of http.MaxBytesReader / http.MaxBytesHandler with 413. Such a request
// never reaches the protocol, so it changes no stored state.
//
// Its signature fits oapi-codegen's StrictHTTPServerOptions.RequestErrorHandlerFunc and
// StdHTTPServerOptions.ErrorHandlerFunc.
func RequestErrorHandler(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		WriteProblem(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	WriteProblem(w, http.StatusBadRequest, err.Error())
}

// DoError is the error of a store's Do for an operation marked x-idempotent, as the
// generated layer returns it: the business failed (or the store did), its transaction was
// rolled back (PostgreSQL) and its key released. [ResponseErrorHandler] tells the client
// that a retry, with the same idempotency key, runs again; for an error wrapping
// [ErrCommitUnknown], that a retry with the same key tells what happened. Other errors
// (an unmarked operation's) get a plain 500 that speaks of no key.
type DoError struct{ Err error }

func (e *DoError) Error() string { return e.Err.Error() }
func (e *DoError) Unwrap() error { return e.Err }

// ResponseErrorHandler answers a business or database error with a 500 problem whose
// detail does not leak the error text (see [DoError] for what it says; an error wrapping
// [ErrCommitUnknown]: 503 with Retry-After, saying that the outcome is unknown and that a
// retry with the same key settles it; one wrapping [ErrPoolExhausted]: 503 with
// Retry-After, saying that nothing ran; another error, not a [DoError], wrapping
// [context.DeadlineExceeded], such as an unmarked operation's past the deadline its
// wiring gives it: 503 with Retry-After), and logs the error with log/slog's default logger
// (level Error; method, path and error as attributes). Its signature fits
// StrictHTTPServerOptions.ResponseErrorHandlerFunc. For another logger, use
// [NewResponseErrorHandler].
func ResponseErrorHandler(w http.ResponseWriter, r *http.Request, err error) {
	slog.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeServerError(w, err)
}

// NewResponseErrorHandler returns a handler like [ResponseErrorHandler] that reports each
// error to log instead of slog.
func NewResponseErrorHandler(log func(r *http.Request, err error)) func(w http.ResponseWriter, r *http.Request, err error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		log(r, err)
		writeServerError(w, err)
	}
}

func writeServerError(w http.ResponseWriter, err error) {
	var de *DoError
	switch {
	case errors.Is(err, ErrCommitUnknown):
		w.Header().Set("Retry-After", "1")
		WriteProblem(w, http.StatusServiceUnavailable, "the connection to the database was lost while the request committed: its outcome is unknown; retry with the same idempotency key to learn it (a retry replays the answer if it committed, and runs the request if not)")
	case errors.Is(err, ErrPoolExhausted):
		w.Header().Set("Retry-After", "1")
		WriteProblem(w, http.StatusServiceUnavailable, "no database connection was free within the acquire timeout: nothing ran; retry, with the same idempotency key if it had one")
	case errors.As(err, &de):
		WriteProblem(w, http.StatusInternalServerError, "the request failed; it may be retried, with the same idempotency key if it had one")
	case errors.Is(err, context.DeadlineExceeded):
		// An unmarked operation past its deadline (a frozen database, an exhausted pool).
		w.Header().Set("Retry-After", "1")
		WriteProblem(w, http.StatusServiceUnavailable, "the request did not finish within its deadline (the database did not answer in time); retry")
	default:
		WriteProblem(w, http.StatusInternalServerError, "the request failed")
	}
}
