package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/idemtest"
)

// The operations boundUnmarked bounds are those of openapi.yaml without x-idempotent.
func TestUnmarkedOperationsAreBounded(t *testing.T) {
	spec, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, item := range spec.Paths.Map() {
		for _, op := range item.Operations() {
			if m, ok := op.Extensions["x-idempotent"]; !ok || m == false {
				want[strings.ToUpper(op.OperationID[:1])+op.OperationID[1:]] = true
			}
		}
	}
	if len(want) != len(unmarked) {
		t.Fatalf("unmarked operations in openapi.yaml: %v; boundUnmarked bounds %v", want, unmarked)
	}
	for op := range want {
		if !unmarked[op] {
			t.Errorf("%s is unmarked in openapi.yaml, not bounded by boundUnmarked", op)
		}
	}
}

// A GET behind a pool whose only connection is held ends at Options.UnmarkedTimeout with
// 503 and Retry-After, instead of waiting for as long as its client does.
func TestUnmarkedGetIsBounded(t *testing.T) {
	ctx := context.Background()
	pool := idemtest.PoolWithMax(t, idemtest.NewDB(t), 1)
	if err := Setup(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const bound = 300 * time.Millisecond
	srv := httptest.NewServer(New(pool, Options{Logf: t.Logf, UnmarkedTimeout: bound}))
	t.Cleanup(srv.Close)
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/payments/pay_1", nil)
	req.Header.Set(AccountHeader, "acct_1")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	took := time.Since(start)
	held.Release()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || took > bound+2*time.Second {
		t.Fatalf("GET behind a held pool: %d, Retry-After %q, after %v; want 503 with Retry-After: 1 at about %v", resp.StatusCode, resp.Header.Get("Retry-After"), took, bound)
	}
	resp, err = http.DefaultClient.Do(req.Clone(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET once the pool is free: %d, want 404 (no such payment)", resp.StatusCode)
	}
}
