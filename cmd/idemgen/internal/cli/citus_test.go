package cli

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/citustest"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// TestKeysHeldOnCitus holds a claim entered through a worker of a Citus cluster
// (IDEM_CITUS_URL; skipped without one) and runs `idemgen keys held` and `keys show`
// through the coordinator: the claim is listed with the node it entered through, and the
// key is held now.
func TestKeysHeldOnCitus(t *testing.T) {
	cl := citustest.NewDB(t)
	ctx := context.Background()
	coordinator := pgtest.Pool(t, cl.Coordinator)
	if err := idem.Migrate(ctx, coordinator); err != nil {
		t.Fatal(err)
	}
	if _, err := coordinator.Exec(ctx, idemgen.CitusSchema); err != nil {
		t.Fatal(err)
	}
	store := idem.NewStore(pgtest.Pool(t, cl.Workers[0]), idem.WithScope(func(context.Context) (string, error) { return "acct-1", nil }))
	inside, unblock, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		p := &idem.Policy{Operation: "createPayment", KeySource: "header Idempotency-Key"}
		_, err := store.Do(ctx, p, ptrTo("k-held"), nil, func(context.Context, idem.Tx) (*idem.Response, error) {
			close(inside)
			<-unblock
			return idem.Record(func(w http.ResponseWriter) error { w.WriteHeader(http.StatusCreated); return nil })
		})
		done <- err
	}()
	<-inside
	defer func() {
		close(unblock)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	t.Setenv("DATABASE_URL", cl.Coordinator)
	code, stdout, stderr := run("keys", "held")
	id := strconv.FormatInt(idem.LockID("acct-1", "k-held"), 10)
	if code != ExitOK || !strings.HasPrefix(stdout, "NODE") || !strings.Contains(stdout, id) || !strings.Contains(stdout, "1 claim held") {
		t.Fatalf("keys held through the coordinator: exit %d:\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := run("keys", "show", "--json", "acct-1", "k-held"); !strings.Contains(stdout, `"held": true`) {
		t.Fatalf("keys show of the held key through the coordinator: exit %d:\n%s", code, stdout)
	}
}
