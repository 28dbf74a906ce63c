// Package idemprom exports the idempotency protocol's metrics to Prometheus.
//
//	outcomes := idemprom.NewOutcomes()
//	store := idem.NewStore(pool, idem.WithObserver(outcomes.Observe))
//	prometheus.MustRegister(outcomes, idemprom.NewStoreCollector(store, time.Hour))
//
// Metrics:
//
//	idem_outcomes_total{operation, outcome}  counter: every idem.Outcome (claimed, completed,
//	                                          replayed, in_progress, mismatch, missing_key,
//	                                          invalid_key, reclaimed, taken_over, lease_lost,
//	                                          released, retried, failed, not_stored, unkeyed)
//	idem_stale_claims                        gauge: claims held now for longer than their lease
//	                                          (pg_locks, pg_stat_activity), read on scrape
//	idem_repeated_payloads                   gauge: payloads seen under more than one key within
//	                                          the window, read on scrape (clients minting a new
//	                                          key per retry)
package idemprom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgen/idemgen/idem"
)

// Outcomes counts protocol outcomes per operation. It is a prometheus.Collector; pass its
// Observe method to idem.WithObserver.
type Outcomes struct {
	counter *prometheus.CounterVec
}

// NewOutcomes returns an unregistered idem_outcomes_total counter vector.
func NewOutcomes() *Outcomes {
	return &Outcomes{counter: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idem_outcomes_total",
		Help: "Idempotency protocol outcomes and events, by operation.",
	}, []string{"operation", "outcome"})}
}

// Observe is an idem.Observer.
func (o *Outcomes) Observe(operation string, outcome idem.Outcome) {
	o.counter.WithLabelValues(operation, string(outcome)).Inc()
}

// Describe implements prometheus.Collector.
func (o *Outcomes) Describe(ch chan<- *prometheus.Desc) { o.counter.Describe(ch) }

// Collect implements prometheus.Collector.
func (o *Outcomes) Collect(ch chan<- prometheus.Metric) { o.counter.Collect(ch) }

var (
	staleDesc = prometheus.NewDesc("idem_stale_claims",
		"Idempotency claims held now for longer than their lease (from pg_locks and pg_stat_activity, database-wide).", nil, nil)
	repeatedDesc = prometheus.NewDesc("idem_repeated_payloads",
		"Request payloads seen under more than one idempotency key within the window.", nil, nil)
)

// StoreCollector reads gauges from the idempotency_keys table on every scrape, each query
// bounded by a 5 s timeout. A failed query is reported to Prometheus as an invalid metric.
type StoreCollector struct {
	store  *idem.Store
	window time.Duration
}

// NewStoreCollector returns a collector of idem_stale_claims and idem_repeated_payloads;
// window (e.g. time.Hour) is how far back repeated payloads are counted.
func NewStoreCollector(store *idem.Store, window time.Duration) *StoreCollector {
	return &StoreCollector{store: store, window: window}
}

// Describe implements prometheus.Collector.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- staleDesc
	ch <- repeatedDesc
}

// Collect implements prometheus.Collector.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := c.store.StaleClaims(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(staleDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, float64(n))
	}
	if rows, err := c.store.RepeatedPayloads(ctx, c.window, 10000); err != nil {
		ch <- prometheus.NewInvalidMetric(repeatedDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(repeatedDesc, prometheus.GaugeValue, float64(len(rows)))
	}
}
