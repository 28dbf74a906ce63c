package idem

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// The Go layer's per-request work outside the database, measured without one (see
// examples/payments/bench BenchmarkHandler for the whole handler): compare
// before and after a change with benchstat, e.g.
//
//	go test ./idem -run '^$' -bench 'Fingerprint|Record|StoredHeaders' -count 10 > new.txt

// benchPayment is the payments example's request body (api.NewPayment's shape).
type benchPayment struct {
	Amount      int64   `json:"amount"`
	Currency    string  `json:"currency"`
	Description *string `json:"description,omitempty"`
}

// benchAnswer is the example's 201 answer (api.Payment's shape).
type benchAnswer struct {
	Id          string    `json:"id"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	Description *string   `json:"description,omitempty"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

func BenchmarkFingerprint(b *testing.B) {
	d := "bench"
	parts := []Part{{Name: "body", Value: &benchPayment{Amount: 1234, Currency: "EUR", Description: &d}}}
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Fingerprint("createPayment", parts...); err != nil {
				b.Fatal(err)
			}
		}
	})
	nested := []Part{{Name: "path id", Value: "pay_123"}, {Name: "body", Value: map[string]any{
		"amount": 1234, "currency": "EUR", "meta": map[string]any{"z": []any{1, "two", true, nil}, "a": "<&>"},
	}}}
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Fingerprint("createRefund", nested...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// visitBenchAnswer writes the example's 201 as the generated Visit method does.
func visitBenchAnswer(w http.ResponseWriter) error {
	d := "bench"
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/pay_0123456789abcdef")
	w.WriteHeader(http.StatusCreated)
	return json.NewEncoder(w).Encode(benchAnswer{Id: "pay_0123456789abcdef", Amount: 1234, Currency: "EUR",
		Description: &d, Status: "succeeded", CreatedAt: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)})
}

// BenchmarkRecord is the recording of the business's answer and the encoding of its stored
// header lines (what the completion writes), then its writing to the client.
func BenchmarkRecord(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		resp, err := Record(visitBenchAnswer)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := encodeStoredHeader(resp); err != nil {
			b.Fatal(err)
		}
		w := discardWriter{h: http.Header{}}
		if err := resp.WriteTo(w); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoredHeaders is the encoding of a response's stored header lines alone.
func BenchmarkStoredHeaders(b *testing.B) {
	resp, err := Record(visitBenchAnswer)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeStoredHeader(resp); err != nil {
			b.Fatal(err)
		}
	}
}

type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header         { return w.h }
func (w discardWriter) WriteHeader(int)             {}
func (w discardWriter) Write(b []byte) (int, error) { return len(b), nil }
