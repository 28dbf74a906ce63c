package idem

import (
	"errors"
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

// ResponseErrorHandler answers a business or database error with a 500 problem whose detail
// does not leak the error text (log it in a middleware or your observer). Its signature fits
// StrictHTTPServerOptions.ResponseErrorHandlerFunc.
func ResponseErrorHandler(w http.ResponseWriter, r *http.Request, err error) {
	WriteProblem(w, http.StatusInternalServerError, "the request failed; it was rolled back and may be retried with the same idempotency key")
}
