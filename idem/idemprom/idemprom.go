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
//	idem_purge_*                             the purger's progress: see [PurgeMetrics]
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

// PurgeMetrics records the passes of an idem.Purger. It is a prometheus.Collector; pass
// its Report method to idem.NewPurger (it logs each pass too, as the purger's default
// report does):
//
//	purges := idemprom.NewPurgeMetrics()
//	prometheus.MustRegister(purges)
//	go idem.NewPurger(store, 5*time.Minute, 1000, purges.Report).Run(ctx)
//
// Metrics:
//
//	idem_purge_deleted_rows_total            counter: rows the passes deleted
//	idem_purge_passes_total{result}          counter: passes that caught up (result="caught_up":
//	                                          deleted every row expired when they began), or not
//	                                          ("failed": an error, or the purger stopped)
//	idem_purge_last_pass_seconds             gauge: how long the last pass took
//	idem_purge_last_pass_batches             gauge: its DELETE statements
//	idem_purge_last_pass_longest_batch_seconds  gauge: its slowest batch (bound and DELETE)
//	idem_purge_caught_up_timestamp_seconds   gauge: the cutoff (database clock) of the last
//	                                          pass that caught up: every key expired before it
//	                                          is gone. time() minus it is the purge's lag; it
//	                                          grows past the interval when the purger falls
//	                                          behind (or stopped), and the backlog with it.
type PurgeMetrics struct {
	deleted      prometheus.Counter
	passes       *prometheus.CounterVec
	lastPass     prometheus.Gauge
	batches      prometheus.Gauge
	longestBatch prometheus.Gauge
	caughtUp     prometheus.Gauge
}

// NewPurgeMetrics returns unregistered purge metrics.
func NewPurgeMetrics() *PurgeMetrics {
	m := &PurgeMetrics{
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idem_purge_deleted_rows_total",
			Help: "Expired idempotency keys deleted by the purger.",
		}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_purge_passes_total",
			Help: "Purge passes, by result: caught_up (every key expired when the pass began is deleted) or failed.",
		}, []string{"result"}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_purge_last_pass_seconds",
			Help: "Duration of the purger's last pass.",
		}),
		batches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_purge_last_pass_batches",
			Help: "DELETE statements of the purger's last pass.",
		}),
		longestBatch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_purge_last_pass_longest_batch_seconds",
			Help: "Duration of the slowest batch of the purger's last pass.",
		}),
		caughtUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_purge_caught_up_timestamp_seconds",
			Help: "Cutoff (database clock, Unix time) of the purger's last pass that caught up: every key expired before it is deleted.",
		}),
	}
	m.passes.WithLabelValues("caught_up")
	m.passes.WithLabelValues("failed")
	return m
}

// Report records r and logs it as the purger's default report does; it is the report
// function of idem.NewPurger.
func (m *PurgeMetrics) Report(r idem.PurgeResult) {
	m.deleted.Add(float64(r.Deleted))
	m.lastPass.Set(r.Duration.Seconds())
	m.batches.Set(float64(r.Batches))
	m.longestBatch.Set(r.LongestBatch.Seconds())
	if r.Err == nil && r.CaughtUp {
		m.passes.WithLabelValues("caught_up").Inc()
		m.caughtUp.Set(float64(r.Cutoff.UnixMicro()) / 1e6)
	} else {
		m.passes.WithLabelValues("failed").Inc()
	}
	idem.LogPurge(r)
}

// Describe implements prometheus.Collector.
func (m *PurgeMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *PurgeMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *PurgeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deleted, m.passes, m.lastPass, m.batches, m.longestBatch, m.caughtUp}
}
