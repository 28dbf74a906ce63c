package idem

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// What a client gets from a generated handler's shape (serve: Store.Do, then
// ResponseErrorHandler's answers) when a flight outlives the flight timeout: a claim
// flight cut is a 500 (nothing ran; not retried by idem), a completion flight cut at its
// COMMIT is a 503 saying the outcome is unknown, with Retry-After; the retry with the same
// key settles it, and the business committed once.

// A stalled COMMIT: a deferred constraint trigger on the business table waits, at
// COMMIT, for an advisory lock the test holds.
const stallCommitSQL = `
CREATE FUNCTION stall_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(777);
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER stall_commit AFTER INSERT ON business
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION stall_commit()`

func TestFlightDeadlineOverHTTP(t *testing.T) {
	e := newOneConnEnv(t)
	if _, err := e.pool.Exec(t.Context(), stallCommitSQL); err != nil {
		t.Fatal(err)
	}
	p := policy("createThing")
	srv := e.serve(p, "", insertOne("x"))

	// The claim's flight stalls: 500, the business did not run.
	release := e.holdLock(t, "LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
	start := time.Now()
	a := post(t, srv, `{"payload":"x"}`, "k")
	if took := time.Since(start); !a.isProblem(http.StatusInternalServerError) || took > flightBound {
		t.Fatalf("stalled claim flight: %d %s after %v; want a 500 problem within %v", a.status, a.body, took, flightBound)
	}
	release()
	e.cutFlightGone()
	if n := e.rows(""); n != 0 {
		t.Fatalf("%d business rows after a cut claim, want 0", n)
	}

	// The completion's COMMIT stalls: 503, unknown outcome, Retry-After.
	release = e.holdLock(t, "SELECT pg_advisory_xact_lock(777)")
	start = time.Now()
	a = post(t, srv, `{"payload":"x"}`, "k")
	if took := time.Since(start); !a.isProblem(http.StatusServiceUnavailable) || a.header.Get("Retry-After") == "" ||
		!strings.Contains(string(a.body), "unknown") || took > flightBound {
		t.Fatalf("stalled COMMIT: %d %v %s after %v; want a 503 problem saying the outcome is unknown, with Retry-After, within %v",
			a.status, a.header, a.body, took, flightBound)
	}
	// pgx cancels the stalled COMMIT of the connection it closed: the transaction rolls
	// back while the test still holds the lock its trigger waits on.
	e.noClaimsHeld()
	release()
	if n, k := e.rows(""), e.keyRows(); n != 0 || k != 0 {
		t.Fatalf("after the cut COMMIT: %d business rows, %d keys; want 0, 0", n, k)
	}
	if a := post(t, srv, `{"payload":"x"}`, "k"); a.status != http.StatusCreated {
		t.Fatalf("retry: %d %s, want 201", a.status, a.body)
	}
	if a := post(t, srv, `{"payload":"x"}`, "k"); a.status != http.StatusCreated || a.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("second retry: %d %v, want the 201 replayed", a.status, a.header)
	}
	if n := e.rows(""); n != 1 {
		t.Fatalf("%d business rows, want 1", n)
	}
	// A cut flight is not retried by idem; the cut completion counts as failed (a failed
	// claim is counted as no outcome, on main as here).
	if r, f := e.count(OutcomeRetried), e.count(OutcomeFailed); r != 0 || f != 1 {
		t.Fatalf("outcomes: %d retried, %d failed; want 0, 1", r, f)
	}
}
