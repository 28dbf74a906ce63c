package idem

import (
	"bytes"
	"context"
	"net/http"
	"testing"
)

// A handler that sends 103 Early Hints before its 201: the 1xx is not the response. The
// first client and every replay get 201 with Location, the JSON body and its Content-Type,
// over real HTTP; the stored row holds 201.
func TestInformationalStatusIsNotTheResponse(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	created := func(ctx context.Context, tx Tx) (*Response, error) {
		if _, err := insertOne("x")(ctx, tx); err != nil {
			return nil, err
		}
		return Record(func(w http.ResponseWriter) error {
			w.Header().Set("Link", "</style.css>; rel=preload; as=style")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusProcessing)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/things/1")
			w.WriteHeader(http.StatusCreated)
			_, err := w.Write([]byte(`{"id":1}` + "\n"))
			return err
		})
	}
	srv := e.serve(p, "", created)
	first := post(t, srv, `{}`, "k")
	replay := post(t, srv, `{}`, "k")
	for i, a := range []answer{first, replay} {
		if a.status != http.StatusCreated || a.header.Get("Location") != "/things/1" ||
			a.header.Get("Content-Type") != "application/json" || !bytes.Equal(a.body, []byte(`{"id":1}`+"\n")) {
			t.Errorf("answer %d: %d %v %q; want 201, Location /things/1, application/json, the body", i, a.status, a.header, a.body)
		}
	}
	if replay.header.Get(ReplayedHeader) != "true" || e.rows("") != 1 {
		t.Fatalf("replay header %q, %d rows; want true, 1", replay.header.Get(ReplayedHeader), e.rows(""))
	}
	var stored int
	if err := e.pool.QueryRow(context.Background(), "SELECT response_status FROM idempotency_keys").Scan(&stored); err != nil || stored != http.StatusCreated {
		t.Fatalf("stored status %d (%v), want 201", stored, err)
	}
}

// A recorded response cannot switch protocols, and a code net/http would panic on is an
// error, not a stored answer.
func TestRecordRefusesUnrecordableStatus(t *testing.T) {
	for _, code := range []int{http.StatusSwitchingProtocols, 42, 1000} {
		r, err := Record(func(w http.ResponseWriter) error {
			w.WriteHeader(code)
			_, _ = w.Write([]byte("x"))
			return nil
		})
		if err == nil {
			t.Errorf("status %d recorded as %+v; want an error", code, r)
		}
	}
}
