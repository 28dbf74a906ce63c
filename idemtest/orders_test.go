package idemtest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idemtest"
	"github.com/idemgen/idemgen/idemtest/internal/orders"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// ordersHandler serves the orders service (idemtest/internal/orders) on a database of its
// own, its business calling gate.Pass.
func ordersHandler(t *testing.T, gate *idemtest.Gate) (http.Handler, *pgxpool.Pool) {
	t.Helper()
	pool := idemtest.NewPool(t)
	if _, err := pool.Exec(context.Background(), orders.Schema); err != nil {
		t.Fatal(err)
	}
	h, err := orders.Handler(pool, gate.Pass)
	if err != nil {
		t.Fatal(err)
	}
	return h, pool
}

// A second small service passes every check, for its POST and its PUT; runs counted by
// the gate, and by a query of the rows the business commits.
func TestOrdersService(t *testing.T) {
	json := http.Header{"Content-Type": {"application/json"}}
	tooLong := strings.Repeat("k", 65) // the spec's maxLength is 64
	t.Run("POST", func(t *testing.T) {
		gate := idemtest.NewGate()
		h, _ := ordersHandler(t, gate)
		idemtest.CheckOperation(t, idemtest.Operation{
			Handler: h, Method: "POST", Path: "/orders", Header: json,
			Body: `{"sku":"book","qty":1}`, OtherBody: `{"sku":"book","qty":2}`,
			KeyRequired: true, InvalidKeys: []string{tooLong}, Gate: gate,
		})
	})
	t.Run("PUT", func(t *testing.T) {
		gate := idemtest.NewGate()
		h, _ := ordersHandler(t, gate)
		idemtest.CheckOperation(t, idemtest.Operation{
			Handler: h, Method: "PUT", Path: "/orders/o-1", Header: json,
			Body: `{"sku":"pen","qty":3}`, OtherBody: `{"sku":"pen","qty":4}`,
			KeyRequired: true, InvalidKeys: []string{tooLong}, Gate: gate,
		})
	})
	t.Run("POST, runs counted by a query", func(t *testing.T) {
		gate := idemtest.NewGate()
		h, pool := ordersHandler(t, gate)
		idemtest.CheckOperation(t, idemtest.Operation{
			Handler: h, Method: "POST", Path: "/orders", Header: json,
			Body: `{"sku":"book","qty":1}`, OtherBody: `{"sku":"book","qty":2}`,
			KeyRequired: true, InvalidKeys: []string{tooLong}, Gate: gate,
			Runs: func(tb testing.TB) int {
				var n int
				if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM orders`).Scan(&n); err != nil {
					tb.Fatal(err)
				}
				return n
			},
		})
	})
}

// naive is a handler without the protocol: every request runs, none is refused; with a
// gate, each run passes it.
type naive struct {
	runs atomic.Int32
	gate *idemtest.Gate
}

func (n *naive) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	run := n.runs.Add(1)
	if n.gate != nil {
		if err := n.gate.Pass(r.Context()); err != nil {
			http.Error(w, "failed", 500)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(201)
	fmt.Fprintf(w, `{"id":"o-%d"}`, run)
}

// The checks fail a handler that is not idempotent: run in a child process (the
// failures are the child's), each check names what it saw.
func TestCheckOperationFailsANaiveHandler(t *testing.T) {
	if os.Getenv("IDEMTEST_NAIVE") == "1" {
		n := &naive{}
		t.Run("counted", func(t *testing.T) {
			idemtest.CheckOperation(t, idemtest.Operation{
				Handler: n, Method: "POST", Path: "/orders", Body: `{"qty":1}`, OtherBody: `{"qty":2}`,
				KeyRequired: true, Runs: func(testing.TB) int { return int(n.runs.Load()) },
			})
		})
		gated := &naive{gate: idemtest.NewGate()}
		t.Run("gated", func(t *testing.T) {
			idemtest.CheckOperation(t, idemtest.Operation{
				Handler: gated, Method: "POST", Path: "/orders", Body: `{"qty":1}`, OtherBody: `{"qty":2}`,
				Gate: gated.gate,
			})
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckOperationFailsANaiveHandler$", "-test.v")
	cmd.Env = append(os.Environ(), "IDEMTEST_NAIVE=1", "DATABASE_URL="+pgtest.URL(t)) // the child needs no cluster of its own
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the checks passed a handler without the protocol:\n%s", out)
	}
	const run = "TestCheckOperationFailsANaiveHandler/"
	for _, want := range []string{
		"--- FAIL: " + run + "counted/duplicates_released_together_run_once",
		"the business ran 10 times for 10 duplicates released together, want 1",
		"--- FAIL: " + run + "counted/a_retry_replays_byte_for_byte",
		"--- FAIL: " + run + "counted/another_payload_under_the_key_is_422",
		"--- FAIL: " + run + "counted/missing_and_invalid_keys_are_400",
		"no key: Created (201)",
		"--- SKIP: " + run + "counted/a_duplicate_in_flight_is_409",
		"--- FAIL: " + run + "gated/a_duplicate_in_flight_is_409",
		"a duplicate of a request in flight: Created (201)",
		"--- PASS: " + run + "gated/a_business_error_releases_the_key", // nothing stored, so nothing to release
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the child's output lacks %q:\n%s", want, out)
		}
	}
}
