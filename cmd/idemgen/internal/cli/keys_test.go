package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// `idemgen keys show` prints a completed key's row (text and -json) and exits 1 for a key
// with no row; `idemgen keys held` lists a claim held now, stale past -stale-after.
func TestKeys(t *testing.T) {
	url := pgtest.NewDB(t)
	pool := pgtest.Pool(t, url)
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	store := idem.NewStore(pool, idem.WithScope(func(context.Context) (string, error) { return "acct-1", nil }))
	created := func(context.Context, idem.Tx) (*idem.Response, error) {
		return idem.Record(func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/payments/p1")
			w.WriteHeader(http.StatusCreated)
			_, err := w.Write([]byte(`{"id":"p1"}`))
			return err
		})
	}
	p := &idem.Policy{Operation: "createPayment", KeySource: "header Idempotency-Key"}
	if _, err := store.Do(ctx, p, ptrTo("k1"), nil, created); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := run("keys", "show", "-database-url", url, "acct-1", "k1")
	for _, want := range []string{`"acct-1"`, "completed", "createPayment", "201", "Location: /payments/p1", "11 bytes", "held now          false",
		"lock              " + fmt.Sprint(idem.LockID("acct-1", "k1"))} {
		if code != ExitOK || !strings.Contains(stdout, want) {
			t.Fatalf("keys show: exit %d, stderr %q, stdout without %q:\n%s", code, stderr, want, stdout)
		}
	}
	t.Setenv("DATABASE_URL", url)
	code, stdout, _ = run("keys", "show", "--json", "acct-1", "k1")
	var got keyJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != ExitOK {
		t.Fatalf("keys show --json: exit %d, %v:\n%s", code, err, stdout)
	}
	if !got.Found || got.Status != "completed" || got.ResponseStatus != 201 || got.ResponseBodyBytes != 11 ||
		len(got.Fingerprint) != 64 || got.CompletedAt == nil || got.LockID != idem.LockID("acct-1", "k1") || got.Held || got.ResponseHeaders[1] != [2]string{"Location", "/payments/p1"} {
		t.Fatalf("keys show --json: %+v", got)
	}
	if code, stdout, _ := run("keys", "show", "acct-1", "nope"); code != ExitFail || !strings.Contains(stdout, "no row") {
		t.Fatalf("keys show of a missing key: exit %d:\n%s", code, stdout)
	}
	if code, _, stderr := run("keys", "show", "acct-1"); code != ExitUsage || !strings.Contains(stderr, "want SCOPE and KEY") {
		t.Fatalf("keys show with one argument: exit %d: %s", code, stderr)
	}

	if code, stdout, _ := run("keys", "held"); code != ExitOK || stdout != "no claims held\n" {
		t.Fatalf("keys held with none: exit %d:\n%s", code, stdout)
	}
	// A claim held now: the lock a request on (acct-1, k2) takes.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	id := idem.LockID("acct-1", "k2")
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid() FROM (SELECT pg_advisory_xact_lock($1::int, $2::int)) AS l",
		int32(id>>32), int32(id)).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = run("keys", "held", "-json", "-stale-after", "1h")
	var held []heldJSON
	if err := json.Unmarshal([]byte(stdout), &held); err != nil || code != ExitOK || len(held) != 1 ||
		held[0].PID != pid || held[0].LockID != id || held[0].Stale || held[0].State != "idle in transaction" {
		t.Fatalf("keys held -json: exit %d, %v: %+v", code, err, held)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, stdout, _ = run("keys", "held", "-stale-after", "50ms")
		if strings.Contains(stdout, "STALE") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the database clock passing 50ms, not an ordering
	}
	if code != ExitOK || !strings.Contains(stdout, strconv.Itoa(pid)) || !strings.Contains(stdout, "STALE") || !strings.Contains(stdout, "1 claim held, 1 stale") {
		t.Fatalf("keys held: exit %d:\n%s", code, stdout)
	}
	if code, stdout, _ := run("keys", "show", "--json", "acct-1", "k2"); code != ExitFail || !strings.Contains(stdout, `"held": true`) {
		t.Fatalf("keys show of a held key without a row: exit %d:\n%s", code, stdout)
	}
}

func ptrTo(s string) *string { return &s }
