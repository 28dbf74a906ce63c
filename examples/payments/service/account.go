package service

import (
	"context"
	"errors"
	"net/http"

	"github.com/idemgen/idemgen/idem"
)

// AccountHeader names the request's account: a stand-in for authentication, and the
// scope of idempotency keys (the same key from two accounts is two requests).
const AccountHeader = "X-Account-ID"

// MaxAccountLength bounds an account id.
const MaxAccountLength = 64

type accountKey struct{}

// AccountFromContext returns the account of the request (set by the service's middleware).
func AccountFromContext(ctx context.Context) (string, bool) {
	a, ok := ctx.Value(accountKey{}).(string)
	return a, ok
}

// requireAccount answers 401 problem+json to a request without one valid X-Account-ID
// header, and puts the account in the context of the others.
func requireAccount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vs := r.Header.Values(AccountHeader)
		switch {
		case len(vs) == 0 || vs[0] == "":
			idem.WriteProblem(w, http.StatusUnauthorized, "this API requires an "+AccountHeader+" header")
			return
		case len(vs) > 1:
			idem.WriteProblem(w, http.StatusUnauthorized, "send one "+AccountHeader+" header, not several")
			return
		case !validAccount(vs[0]):
			idem.WriteProblem(w, http.StatusUnauthorized, AccountHeader+" must be 1 to 64 letters, digits, '-', '_' or '.'")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, vs[0])))
	})
}

func validAccount(s string) bool {
	if s == "" || len(s) > MaxAccountLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// scope is the idem.ScopeFunc of the service: keys are unique per account.
func scope(ctx context.Context) (string, error) {
	a, ok := AccountFromContext(ctx)
	if !ok {
		return "", errors.New("no account in the request context")
	}
	return a, nil
}

// mustAccount returns the account; the middleware guarantees there is one.
func mustAccount(ctx context.Context) string {
	a, _ := AccountFromContext(ctx)
	return a
}
