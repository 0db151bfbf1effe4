package asyqueue

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sched"
)

// Metrics are the queue server's Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	restores       *prometheus.CounterVec
	cacheLookups   *prometheus.CounterVec
	denials        *prometheus.CounterVec
	compiles       *prometheus.HistogramVec
	estimateErrors prometheus.Histogram
	// tally counts the same events by interval for the dashboard's
	// history (nil: none).
	tally *dashboard.Tally
}

// WithTally makes m also count cache lookups, denials, compiles and queue
// waits in t, for the dashboard's history; it returns m.
func (m *Metrics) WithTally(t *dashboard.Tally) *Metrics {
	m.tally = t
	return m
}

// NewMetrics registers the queue server's metrics with reg, and the
// scheduling core's (queued and running per tier, downgrades, halts,
// interactive denials) read from d at each scrape; d is nil where another
// process owns the core (multi-node mode).
func NewMetrics(reg prometheus.Registerer, d *Dispatcher) *Metrics {
	m := &Metrics{
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_asy_restores_total", Help: "Files named by hash with restore, by whether the upload store had them.",
		}, []string{"result"}),
		cacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_asy_cache_lookups_total", Help: "Result cache lookups, by hit or miss.",
		}, []string{"result"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_asy_denied_total", Help: "Tasks denied before running, by reason.",
		}, []string{"reason"}),
		compiles: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "usher_asy_compile_seconds", Help: "How long asy ran, by success.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 11),
		}, []string{"success"}),
		estimateErrors: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "usher_asy_estimate_error_seconds", Help: "Actual wait minus the last estimate sent (negative: earlier than told).",
			Buckets: []float64{-30, -10, -5, -2, -1, -0.5, -0.1, 0.1, 0.5, 1, 2, 5, 10, 30},
		}),
	}
	reg.MustRegister(m.restores, m.cacheLookups, m.denials, m.compiles, m.estimateErrors)
	if d != nil {
		reg.MustRegister(NewCoreCollector(func() (sched.Snapshot, bool) {
			snap, err := d.Snapshot()
			return snap, err == nil
		}))
	}
	return m
}

func (m *Metrics) restored(hits, misses int) {
	if m == nil {
		return
	}
	m.restores.WithLabelValues("hit").Add(float64(hits))
	m.restores.WithLabelValues("miss").Add(float64(misses))
}

func (m *Metrics) cache(hit bool) {
	if m == nil {
		return
	}
	result := "miss"
	if hit {
		result = "hit"
	}
	m.cacheLookups.WithLabelValues(result).Inc()
	m.tally.CacheLookup(hit)
}

func (m *Metrics) denied(reason string) {
	if m != nil {
		m.denials.WithLabelValues(reason).Inc()
		m.tally.Denied(reason)
	}
}

func (m *Metrics) compiled(out sandbox.Outcome) {
	if m == nil {
		return
	}
	success := "false"
	if out.Success {
		success = "true"
	}
	m.compiles.WithLabelValues(success).Observe(out.Time.Seconds())
	m.tally.Ended(out.Success, out.Time)
}

// endedUnrun counts, for the history, a task that started and ended
// without asy's outcome: the scheduler or its backend ended it.
func (m *Metrics) endedUnrun() {
	if m != nil {
		m.tally.Ended(false, 0)
	}
}

// waited counts how long a queued task waited for its backend, for the
// history.
func (m *Metrics) waited(d time.Duration) {
	if m != nil {
		m.tally.Waited(d)
	}
}

func (m *Metrics) estimateError(d time.Duration) {
	if m != nil {
		m.estimateErrors.Observe(d.Seconds())
	}
}

// coreCollector reads the scheduling core's snapshot at scrape time.
type coreCollector struct {
	snapshot func() (sched.Snapshot, bool)
}

// NewCoreCollector exports the scheduling core's state (usher_asy_queued,
// usher_asy_running, usher_asy_tier_limit and the downgrade, halt and
// interactive denial counters) from the snapshot that snapshot returns at
// each scrape; it exports nothing while snapshot says there is none (a
// scheduler that stands by).
func NewCoreCollector(snapshot func() (sched.Snapshot, bool)) prometheus.Collector {
	return &coreCollector{snapshot: snapshot}
}

var (
	queuedDesc     = prometheus.NewDesc("usher_asy_queued", "Tasks waiting in the queue.", nil, nil)
	runningDesc    = prometheus.NewDesc("usher_asy_running", "Tasks running, by tier.", []string{"tier"}, nil)
	limitDesc      = prometheus.NewDesc("usher_asy_tier_limit", "Running tasks a tier and the slower ones may hold.", []string{"tier"}, nil)
	downgradesDesc = prometheus.NewDesc("usher_asy_downgrades_total", "Default tasks moved to a faster tier.", nil, nil)
	haltsDesc      = prometheus.NewDesc("usher_asy_halts_total", "Interactive tasks halted to free their backend.", nil, nil)
	interDenyDesc  = prometheus.NewDesc("usher_asy_interactive_denials_total", "Interactive tasks denied for want of a free backend.", nil, nil)
)

// Describe sends the descriptions of the core's metrics.
func (c *coreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queuedDesc, runningDesc, limitDesc, downgradesDesc, haltsDesc, interDenyDesc} {
		ch <- d
	}
}

// Collect reads one snapshot of the core.
func (c *coreCollector) Collect(ch chan<- prometheus.Metric) {
	snap, ok := c.snapshot()
	if !ok {
		return
	}
	queued := 0
	for _, q := range snap.Queues {
		queued += q.Queued
	}
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(queued))
	for _, t := range snap.Tiers {
		ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(t.Running), t.Name)
		ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(t.Limit), t.Name)
	}
	ch <- prometheus.MustNewConstMetric(downgradesDesc, prometheus.CounterValue, float64(snap.Counters.Downgrades))
	ch <- prometheus.MustNewConstMetric(haltsDesc, prometheus.CounterValue, float64(snap.Counters.Halts))
	ch <- prometheus.MustNewConstMetric(interDenyDesc, prometheus.CounterValue, float64(snap.Counters.Denials))
}
