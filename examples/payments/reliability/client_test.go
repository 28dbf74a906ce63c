package reliability

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemclient"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// lossyNetwork starts a toxiproxy (as a library) in front of upstream (host:port) that
// resets resetShare of the connections when their request arrives (the server never
// sees it) and cuts dropShare of them when the server's response comes back (the server
// processed the request; the client gets no answer). Each connection draws its fate
// once: the client must open one per request (no keep-alive) for the shares to be per
// request. It returns the proxy's host:port.
func lossyNetwork(t *testing.T, upstream string, resetShare, dropShare float64) string {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "payments", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	for _, toxic := range []string{
		fmt.Sprintf(`{"name":"reset_before","type":"reset_peer","stream":"upstream","toxicity":%g,"attributes":{"timeout":0}}`, resetShare),
		fmt.Sprintf(`{"name":"drop_response","type":"limit_data","stream":"downstream","toxicity":%g,"attributes":{"bytes":0}}`, dropShare),
	} {
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			t.Fatalf("adding toxic %s: %v", toxic, err)
		}
	}
	return p.Listen
}

// TestGeneratedClientThroughFaults: the example's generated IdempotentClient, through a
// fault proxy that drops 30% of the responses after the server processed them and
// resets 10% of the connections before: 500 logical payments from 16 goroutines are all
// answered 201, the database holds exactly 500 payments and 500 recorded keys, each
// call's key is the one its payment and its idempotency_keys row carry (the key stayed
// the same across the call's attempts: a key minted per attempt would leave a second
// row, and a second payment, for every response lost after the server processed it).
func TestGeneratedClientThroughFaults(t *testing.T) {
	const calls, workers = 500, 16
	dbURL := pgtest.NewDB(t)
	base := startInProcess(t, dbURL, service.Options{})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxied := "http://" + lossyNetwork(t, u.Host, 0.10, 0.30)

	const account = "acct_faults"
	var attempts, transportErrors atomic.Int64
	retry := &idemclient.Client{
		// P(an attempt fails) is about 0.1 + 0.9*0.3 = 0.37; 20 attempts leave a call
		// unanswered with probability 0.37^20 < 3e-9.
		MaxAttempts: 20, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond,
		AttemptTimeout: 10 * time.Second,
		OnAttempt: func(a idemclient.Attempt) {
			attempts.Add(1)
			if a.Err != nil {
				transportErrors.Add(1)
			}
		},
	}
	httpClient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	c, err := api.NewIdempotentClient(proxied, retry, api.WithHTTPClient(httpClient),
		api.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
			req.Header.Set(service.AccountHeader, account)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		key      string
		status   int
		replayed bool
		paymentK string // the key the payment in the answer records
		err      error
	}
	out := make([]outcome, calls)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	release := make(chan struct{})
	next := atomic.Int64{}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			for {
				i := int(next.Add(1)) - 1
				if i >= calls {
					return
				}
				desc := fmt.Sprintf("order %d", i)
				resp, res, err := c.CreatePayment(ctx, nil, api.CreatePaymentJSONRequestBody{Amount: int64(100 + i), Currency: "EUR", Description: &desc})
				o := outcome{err: err}
				if res != nil {
					o.key, o.replayed = res.Key, res.Replayed
				}
				if resp != nil {
					o.status = resp.StatusCode()
					if resp.JSON201 != nil && resp.JSON201.Description != nil && *resp.JSON201.Description != desc {
						o.err = fmt.Errorf("answer of call %d describes %q", i, *resp.JSON201.Description)
					}
				}
				out[i] = o
			}
		}()
	}
	close(release)
	wg.Wait()
	elapsed := time.Since(start)

	keys := map[string]int{}
	replayed := 0
	for i, o := range out {
		if o.err != nil || o.status != http.StatusCreated {
			t.Errorf("call %d: status %d, err %v", i, o.status, o.err)
			continue
		}
		keys[o.key]++
		if o.replayed {
			replayed++
		}
	}
	if len(keys) != calls {
		t.Errorf("%d distinct keys among %d calls", len(keys), calls)
	}

	pool := pgtest.Pool(t, dbURL)
	var payments, paymentKeys, rows, rowKeys int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT idempotency_key) FROM payments WHERE idempotency_scope = $1`, account).Scan(&payments, &paymentKeys); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT key) FROM idempotency_keys WHERE scope = $1 AND operation = 'createPayment'`, account).Scan(&rows, &rowKeys); err != nil {
		t.Fatal(err)
	}
	if payments != calls || paymentKeys != calls || rows != calls {
		t.Errorf("database: %d payments (%d keys), %d recorded keys; want exactly %d each", payments, paymentKeys, rows, calls)
	}
	// Every call's key is a recorded key whose payment exists: the key of its first
	// attempt is the key of its last.
	var matched int
	kl := make([]string, 0, len(keys))
	for k := range keys {
		kl = append(kl, k)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys k JOIN payments p
		ON p.idempotency_scope = k.scope AND p.idempotency_key = k.key
		WHERE k.scope = $1 AND k.key = ANY($2) AND k.status = 'completed' AND k.response_status = 201`, account, kl).Scan(&matched); err != nil {
		t.Fatal(err)
	}
	if matched != calls {
		t.Errorf("%d of the %d calls' keys have a completed row and a payment", matched, calls)
	}
	n := attempts.Load()
	t.Logf("%d calls from %d goroutines in %v: %d attempts (%d transport errors), %d answers were replays; %d payments, %d recorded keys",
		calls, workers, elapsed.Round(time.Millisecond), n, transportErrors.Load(), replayed, payments, rows)
	// The faults happened: responses lost after processing come back as replays.
	if transportErrors.Load() < calls/10 || replayed < calls/20 {
		t.Errorf("only %d transport errors and %d replays: the proxy did not inject the faults", transportErrors.Load(), replayed)
	}
}
