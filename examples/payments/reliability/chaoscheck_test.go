package reliability

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A checker that cannot fail is a defect: checkChaos is given a clean synthetic history
// (which it passes), then the same history with one bug planted at a time, each of which
// it must report under its name.
func TestChaosCheckerCatchesPlantedBugs(t *testing.T) {
	healed := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clean := func() (chaosHistory, chaosDB) {
		var h chaosHistory
		db := chaosDB{keys: map[string]chaosKeyRow{}, charges: map[string]int{}}
		for i := 1; i <= 3; i++ {
			key := fmt.Sprintf("k-%d", i)
			c := chaosCall{n: i, key: key, amount: int64(100 + i), description: fmt.Sprintf("call %d", i), status: http.StatusCreated}
			body := []byte(fmt.Sprintf(`{"amount":%d,"id":"pay_%d"}`, c.amount, i))
			h.calls = append(h.calls, c)
			at := healed.Add(-time.Duration(10-i) * time.Second)
			// A lost answer (transport error), a 409 while it ran, the execution, a replay.
			h.attempts = append(h.attempts,
				chaosAttempt{key: key, start: at, end: at.Add(time.Second), err: "EOF"},
				chaosAttempt{key: key, start: at, end: at.Add(10 * time.Millisecond), status: http.StatusConflict},
				chaosAttempt{key: key, start: at, end: at.Add(50 * time.Millisecond), status: http.StatusCreated, body: body},
				chaosAttempt{key: key, start: at.Add(time.Second), end: at.Add(time.Second + time.Millisecond), status: http.StatusCreated, replayed: true, body: body})
			db.payments = append(db.payments, chaosPayment{id: fmt.Sprintf("pay_%d", i), key: key, amount: c.amount, description: c.description})
			db.keys[key] = chaosKeyRow{status: "completed", responseStatus: http.StatusCreated, body: body}
			db.charges[key] = 1
		}
		return h, db
	}
	h, db := clean()
	if v := checkChaos(h, db, healed); len(v.problems) != 0 || v.duplicates+v.lost+v.stuck+v.mismatched+v.overdue != 0 || v.downstream != 3 {
		t.Fatalf("a clean history: %+v", v)
	}

	for _, c := range []struct {
		name  string
		plant func(h *chaosHistory, db *chaosDB)
		count func(v chaosVerdict) int
		want  string
	}{
		{"a second payment for a key (a retry executed again)", func(h *chaosHistory, db *chaosDB) {
			db.payments = append(db.payments, chaosPayment{id: "pay_9", key: "k-2", amount: 102, description: "call 2"})
		}, func(v chaosVerdict) int { return v.duplicates }, "DUPLICATE: key k-2"},
		{"a completion outside the business transaction (the key committed, the payment rolled back)", func(h *chaosHistory, db *chaosDB) {
			db.payments = db.payments[1:] // k-1's payment gone, its key row and its 2xx kept
		}, func(v chaosVerdict) int { return v.lost }, "LOST: call 1 (key k-1) has no payment"},
		{"a 2xx for a request that rolled back (nothing committed)", func(h *chaosHistory, db *chaosDB) {
			db.payments = db.payments[:2]
			delete(db.keys, "k-3")
		}, func(v chaosVerdict) int { return v.lost }, "LOST: key k-3 was answered 201"},
		{"a replay that differs from the committed response", func(h *chaosHistory, db *chaosDB) {
			h.attempts[3].body = []byte(`{"amount":101,"id":"pay_1" }`)
		}, func(v chaosVerdict) int { return v.mismatched }, "key k-1: a 2xx (replayed true) differs"},
		{"a payment carrying another request's amount", func(h *chaosHistory, db *chaosDB) {
			db.payments[1].amount = 999
		}, func(v chaosVerdict) int { return v.mismatched }, "call 2 (key k-2): its payment is 999"},
		{"a key answered 409 long after the faults healed", func(h *chaosHistory, db *chaosDB) {
			at := healed.Add(stuckAfter + time.Second)
			h.attempts = append(h.attempts, chaosAttempt{key: "k-2", start: at, end: at.Add(time.Millisecond), status: http.StatusConflict})
		}, func(v chaosVerdict) int { return v.stuck }, "STUCK: key k-2"},
		{"an attempt answered past the request bound", func(h *chaosHistory, db *chaosDB) {
			h.attempts[2].end = h.attempts[2].start.Add(requestBound + slack + time.Second)
		}, func(v chaosVerdict) int { return v.overdue }, "OVERDUE: an attempt of key k-1"},
		{"a star answered 2xx that was never counted (the Redis store's success without its business)", func(h *chaosHistory, db *chaosDB) {
			at := healed.Add(-time.Second)
			h.attempts = append(h.attempts,
				chaosAttempt{key: "star-1", start: at, end: at.Add(time.Millisecond), status: http.StatusOK, body: []byte(`{"payment_id":"pay_1","stars":1}`)},
				chaosAttempt{key: "star-2", start: at, end: at.Add(time.Millisecond), status: http.StatusOK, body: []byte(`{"payment_id":"pay_1","stars":2}`)})
			db.stars = map[string]int64{"pay_1": 1}
		}, func(v chaosVerdict) int { return v.lost }, "LOST: payment pay_1 was starred (2xx) under 2 keys but has 1 stars"},
		{"a second charge for a payment (its retry called the provider under a fresh key)", func(h *chaosHistory, db *chaosDB) {
			db.charges["k-2"] = 2
		}, func(v chaosVerdict) int { return v.duplicates }, "DUPLICATE: the provider charged key k-2's payment 2 times"},
		{"a payment the provider never charged", func(h *chaosHistory, db *chaosDB) {
			delete(db.charges, "k-3")
		}, func(v chaosVerdict) int { return v.lost }, "LOST: call 3 (key k-3) has a payment but the provider no charge"},
		{"a payment under a key no call sent", func(h *chaosHistory, db *chaosDB) {
			db.payments = append(db.payments, chaosPayment{id: "pay_x", key: "stray"})
		}, func(v chaosVerdict) int { return v.duplicates }, "which no call sent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, db := clean()
			c.plant(&h, &db)
			v := checkChaos(h, db, healed)
			if c.count(v) != 1 || !strings.Contains(strings.Join(v.problems, "\n"), c.want) {
				t.Errorf("the planted bug: counted %d (want 1), problems:\n%s\nwant one containing %q", c.count(v), strings.Join(v.problems, "\n"), c.want)
			}
		})
	}
}
