package payments_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/idem/idemclient"
)

// Example_client calls the payments service with the generated IdempotentClient: one
// idempotency key per logical call, the same key and body on every attempt.
func Example_client() {
	retry := &idemclient.Client{
		MaxAttempts:    6,                      // the first attempt included
		BaseDelay:      200 * time.Millisecond, // full jitter in [0, min(MaxDelay, BaseDelay·2ⁿ⁻¹))
		MaxDelay:       5 * time.Second,
		AttemptTimeout: 10 * time.Second, // a response lost on the way is retried after this
	}
	c, err := api.NewIdempotentClient("https://payments.example.com", retry,
		api.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
			req.Header.Set("X-Account-ID", "acct_42") // runs on every attempt
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds every attempt and wait
	defer cancel()

	// The key is minted for this call (a UUID v4). To make a call resumable across process
	// restarts, store a key first and pass it: idemclient.WithKey(orderKey).
	body := api.CreatePaymentJSONRequestBody{Amount: 1999, Currency: "EUR"}
	resp, res, err := c.CreatePayment(ctx, nil, body)
	var noAnswer *idemclient.CallError
	switch {
	case errors.As(err, &noAnswer):
		log.Printf("no answer after %d attempts; retry later with idemclient.WithKey(%q)", noAnswer.Result.Attempts, noAnswer.Result.Key)
	case err != nil:
		log.Fatal(err) // before any attempt: an invalid key, an unreadable body
	case resp.JSON201 != nil:
		fmt.Printf("payment %s (key %s, %d attempts, replayed %v)\n", resp.JSON201.Id, res.Key, res.Attempts, res.Replayed)
	case resp.StatusCode() == http.StatusUnprocessableEntity:
		log.Fatalf("key %s was used with another payment: a bug, not retried", res.Key)
	default:
		log.Printf("answered %d after %d attempts (retryable: %v)", resp.StatusCode(), res.Attempts, res.Retryable)
	}
}
