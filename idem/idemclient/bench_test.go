package idemclient_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/idem/idemclient"
)

// BenchmarkDo measures what the retry loop costs a call that succeeds at once, against a
// plain http.Client doing the same POST in the same run (report the ratio of the two
// ns/op): the key minted and checked, the body buffered, the answer read whole.
func BenchmarkDo(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"pay_1","amount":1999,"currency":"EUR"}`))
	}))
	defer srv.Close()
	body := []byte(`{"amount":1999,"currency":"EUR","description":"order 1"}`)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
			req.Header.Set("Idempotency-Key", "k")
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("idemclient", func(b *testing.B) {
		c := &idemclient.Client{Doer: hc}
		key := idemclient.Key{Header: "Idempotency-Key", Format: "uuid"}
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
			resp, _, err := c.Do(context.Background(), req, key)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
		}
	})
	b.Run("idemclient-json-body-key", func(b *testing.B) {
		c := &idemclient.Client{Doer: hc}
		key := idemclient.Key{JSONPointer: "/idempotency_key"}
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
			resp, _, err := c.Do(context.Background(), req, key)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
		}
	})
}
