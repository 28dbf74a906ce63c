package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/idemgen/idemgen/examples/payments/api"
	"github.com/idemgen/idemgen/examples/payments/db"
	"github.com/idemgen/idemgen/examples/payments/service"
	"github.com/idemgen/idemgen/idem/idemclient"
)

// Shares of the lossy network of the client phase, per connection (one per attempt).
const (
	lossyReset = 0.10 // connections reset before the request reaches the service
	lossyDrop  = 0.30 // responses dropped after the service processed the request
)

// clientRun is what the client phase did.
type clientRun struct {
	name                      string
	calls, answered, replays  int
	attempts, transportErrors int64
	rows                      int64
	elapsed                   time.Duration
	firstProblem              string
}

// lossyNetwork starts toxiproxy (as a library) in front of base: it resets lossyReset of
// the connections when their request arrives and cuts lossyDrop of them when the
// service's answer comes back. It returns the proxy's base URL and its stop.
func lossyNetwork(base string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	p := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()), "payments", "127.0.0.1:0", u.Host)
	if err := p.Start(); err != nil {
		return "", nil, err
	}
	for _, toxic := range []string{
		fmt.Sprintf(`{"name":"reset","type":"reset_peer","stream":"upstream","toxicity":%g,"attributes":{"timeout":0}}`, lossyReset),
		fmt.Sprintf(`{"name":"drop","type":"limit_data","stream":"downstream","toxicity":%g,"attributes":{"bytes":0}}`, lossyDrop),
	} {
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			p.Stop()
			return "", nil, err
		}
	}
	return "http://" + p.Listen, p.Stop, nil
}

// clientPhase creates calls payments with the generated api.IdempotentClient through the
// lossy network, concurrency at a time: each call one key (prefix + its index, through
// idemclient's NewKey hook, so the database can be counted), retried with it.
func clientPhase(ctx context.Context, calls, concurrency int, base, account, prefix string, q *db.Queries, logf func(string, ...any)) (*clientRun, error) {
	r := &clientRun{name: fmt.Sprintf("4. %d payments through the generated client, lossy network", calls), calls: calls}
	logf("%s (%.0f%% of responses dropped after processing, %.0f%% of connections reset; toxiproxy) ...", r.name, 100*lossyDrop, 100*lossyReset)
	proxied, stop, err := lossyNetwork(base)
	if err != nil {
		return nil, err
	}
	defer stop()
	var n atomic.Int64
	retry := &idemclient.Client{
		MaxAttempts: 20, BaseDelay: 5 * time.Millisecond, MaxDelay: 200 * time.Millisecond, AttemptTimeout: 10 * time.Second,
		NewKey: func() (string, error) { return fmt.Sprintf("%s%d", prefix, n.Add(1)-1), nil },
		OnAttempt: func(a idemclient.Attempt) {
			atomic.AddInt64(&r.attempts, 1)
			if a.Err != nil {
				atomic.AddInt64(&r.transportErrors, 1)
			}
		},
	}
	// One connection per attempt, so that every attempt meets the network's odds.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	c, err := api.NewIdempotentClient(proxied, retry, api.WithHTTPClient(hc), api.WithRequestEditorFn(func(ctx context.Context, req *http.Request) error {
		req.Header.Set(service.AccountHeader, account)
		return nil
	}))
	if err != nil {
		return nil, err
	}
	before, err := q.CountPaymentsByKeyPrefix(ctx, db.CountPaymentsByKeyPrefixParams{Scope: account, KeyPrefix: prefix})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= calls || ctx.Err() != nil {
					return
				}
				desc := fmt.Sprintf("client order %d", i)
				resp, res, err := c.CreatePayment(ctx, nil, api.CreatePaymentJSONRequestBody{Amount: 1999, Currency: "EUR", Description: &desc})
				mu.Lock()
				switch {
				case err != nil:
					if r.firstProblem == "" {
						r.firstProblem = err.Error()
					}
				case resp.StatusCode() != http.StatusCreated:
					if r.firstProblem == "" {
						r.firstProblem = fmt.Sprintf("key %s answered %d: %s", res.Key, resp.StatusCode(), resp.Body)
					}
				default:
					r.answered++
					if res.Replayed {
						r.replays++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	after, err := q.CountPaymentsByKeyPrefix(ctx, db.CountPaymentsByKeyPrefixParams{Scope: account, KeyPrefix: prefix})
	if err != nil {
		return nil, err
	}
	r.rows = after - before
	return r, nil
}

// problems lists what went wrong in the phase.
func (r *clientRun) problems() []string {
	var out []string
	if r.answered != r.calls {
		out = append(out, fmt.Sprintf("%s: %d of %d calls answered 201 (first problem: %s)", r.name, r.answered, r.calls, r.firstProblem))
	}
	if r.rows != int64(r.calls) {
		out = append(out, fmt.Sprintf("%s: %d payments created, want %d", r.name, r.rows, r.calls))
	}
	return out
}
