package idem

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Like net/http's server: headers set by a visit that writes no status and no body are
// sent with the implied 200.
func TestRecordHeadersWithoutWrite(t *testing.T) {
	r, err := Record(func(w http.ResponseWriter) error {
		w.Header().Set("Location", "/things/1")
		return nil
	})
	if err != nil || r.Status != http.StatusOK || header(r, "Location") != "/things/1" {
		t.Fatalf("Record = %+v, %v; want 200 with Location", r, err)
	}
}

// Unstored fields are dropped whatever the case of their name: net/http sends a header
// map key as written, so a non-canonical "set-cookie" still sets a cookie.
func TestStoredHeaderDropsNonCanonicalSetCookie(t *testing.T) {
	r, err := Record(func(w http.ResponseWriter) error {
		w.Header()["set-cookie"] = []string{"session=secret"}
		w.Header()["x-kept"] = []string{"yes"}
		w.WriteHeader(http.StatusCreated)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if header(r, "Set-Cookie") != "session=secret" || header(r, "X-Kept") != "yes" {
		t.Fatalf("recorded headers %+v; want set-cookie and x-kept kept for the first answer", r.Header)
	}
	for _, l := range r.StoredHeader() {
		if http.CanonicalHeaderKey(l.Name) == "Set-Cookie" {
			t.Fatalf("stored headers %+v carry a set-cookie", r.StoredHeader())
		}
	}
}

// Header changes after WriteHeader are not part of the response.
func TestRecordHeaderAfterWriteHeader(t *testing.T) {
	r, err := Record(func(w http.ResponseWriter) error {
		w.Header().Set("X-Before", "1")
		w.WriteHeader(http.StatusAccepted)
		w.Header().Set("X-After", "1")
		_, err := w.Write([]byte("ok"))
		return err
	})
	if err != nil || r.Status != http.StatusAccepted || header(r, "X-Before") != "1" || header(r, "X-After") != "" || string(r.Body) != "ok" {
		t.Fatalf("Record = %+v, %v", r, err)
	}
}

// WriteTo sends the stored lines, status and body; a replay also says so.
func TestWriteToReplayed(t *testing.T) {
	stored := &Response{Status: http.StatusCreated, Header: []HeaderLine{{"Location", "/things/1"}}, Body: []byte("{}\n")}
	for _, o := range []Outcome{OutcomeCompleted, OutcomeReplayed} {
		r := *stored
		r.Outcome = o
		w := httptest.NewRecorder()
		if err := r.WriteTo(w); err != nil {
			t.Fatal(err)
		}
		want := ""
		if o == OutcomeReplayed {
			want = "true"
		}
		if w.Code != http.StatusCreated || w.Body.String() != "{}\n" || w.Header().Get("Location") != "/things/1" ||
			w.Header().Get(ReplayedHeader) != want {
			t.Fatalf("%s: %d %q %v", o, w.Code, w.Body, w.Header())
		}
	}
}
