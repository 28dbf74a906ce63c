package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// `idemgen purge` deletes exactly the expired keys, -dry-run counts exactly those, and
// the URL comes from -database-url or DATABASE_URL.
func TestPurge(t *testing.T) {
	url := pgtest.NewDB(t)
	pool := pgtest.Pool(t, url)
	ctx := context.Background()
	if err := idem.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	store := idem.NewStore(pool)
	ok := func(context.Context, idem.Tx) (*idem.Response, error) {
		return idem.Record(func(w http.ResponseWriter) error { w.WriteHeader(http.StatusNoContent); return nil })
	}
	for i, retention := range []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Hour, time.Hour} {
		p := &idem.Policy{Operation: "op", KeySource: "header Idempotency-Key", Lease: time.Millisecond, Retention: retention}
		key := fmt.Sprint("k", i)
		if _, err := store.Do(ctx, p, &key, nil, ok); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (total, expired int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE expires_at <= now()) FROM idempotency_keys`).Scan(&total, &expired); err != nil {
			t.Fatal(err)
		}
		return total, expired
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, expired := count(); expired == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("keys did not expire within 10s")
		}
	}

	code, stdout, stderr := run("purge", "-dry-run", "--database-url", url)
	if code != ExitOK || stdout != "3 expired idempotency keys (dry run: nothing deleted)\n" {
		t.Fatalf("purge -dry-run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if total, _ := count(); total != 5 {
		t.Fatalf("-dry-run deleted rows: %d left of 5", total)
	}

	t.Setenv("DATABASE_URL", url)
	code, stdout, stderr = run("purge", "-batch", "2")
	if code != ExitOK || !strings.HasPrefix(stdout, "deleted 3 expired idempotency keys in ") {
		t.Fatalf("purge: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if total, expired := count(); total != 2 || expired != 0 {
		t.Fatalf("after purge: %d rows (want the 2 live ones), %d expired", total, expired)
	}
	if code, stdout, _ := run("purge"); code != ExitOK || !strings.HasPrefix(stdout, "deleted 0 ") {
		t.Fatalf("second purge: exit %d, stdout %q", code, stdout)
	}
}

func TestPurgeUsage(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"purge"}, ExitUsage, "no database: set -database-url or DATABASE_URL"},
		{[]string{"purge", "-database-url", "postgres://x", "-batch", "0"}, ExitUsage, "-batch must be at least 1"},
		{[]string{"purge", "extra"}, ExitUsage, `unexpected argument "extra"`},
		{[]string{"purge", "-database-url", "::not a url"}, ExitUsage, "database URL"},
		{[]string{"purge", "-database-url", pgtest.NewDB(t)}, ExitFail, "idempotency_keys"}, // no table
	} {
		code, stdout, stderr := run(c.args...)
		if code != c.code || !strings.Contains(stderr, c.out) {
			t.Errorf("idemgen %s: exit %d (want %d), stderr lacks %q:\n%s%s", strings.Join(c.args, " "), code, c.code, c.out, stdout, stderr)
		}
	}
}

// When -timeout runs out, purge says so, and how many rows it deleted by then.
func TestPurgeTimeout(t *testing.T) {
	url := pgtest.NewDB(t)
	if err := idem.Migrate(context.Background(), pgtest.Pool(t, url)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"purge", "-timeout", "1ns", "-database-url", url}, "idemgen purge: -timeout 1ns elapsed; 0 rows deleted so far\n"},
		{[]string{"purge", "-dry-run", "-timeout", "1ns", "-database-url", url}, "idemgen purge: -timeout 1ns elapsed; the expired keys were not counted\n"},
	} {
		code, stdout, stderr := run(c.args...)
		if code != ExitFail || stdout != "" || stderr != c.want {
			t.Errorf("idemgen %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(c.args, " "), code, stdout, stderr, c.want)
		}
	}
}
