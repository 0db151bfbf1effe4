package jobsapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// Collector exports the generic jobs' state to Prometheus, read from the
// engine at each scrape.
type Collector struct {
	stats                          func() (jobtype.Stats, bool)
	queued, running, blocked, keys *prometheus.Desc
	agents, total                  *prometheus.Desc
}

// NewCollector returns a Collector of the engine's state.
func NewCollector(e *jobs.Engine) *Collector {
	return NewCollectorFunc(func() (jobtype.Stats, bool) { return e.Stats(), true })
}

// NewCollectorFunc returns a Collector of the state stats returns at each
// scrape; it exports nothing while stats says there is none (in
// multi-node mode, a scheduler that does not lead runs no engine).
func NewCollectorFunc(stats func() (jobtype.Stats, bool)) *Collector {
	return &Collector{
		stats:   stats,
		queued:  prometheus.NewDesc("usher_jobs_queued", "Generic jobs ready to run, by queue.", []string{"queue"}, nil),
		running: prometheus.NewDesc("usher_jobs_running", "Generic jobs running, by queue.", []string{"queue"}, nil),
		blocked: prometheus.NewDesc("usher_jobs_blocked", "Ready jobs held back by a key, group or read/write gate, by queue.", []string{"queue"}, nil),
		keys:    prometheus.NewDesc("usher_jobs_key_running", "Running jobs holding a limited key.", []string{"key"}, nil),
		agents:  prometheus.NewDesc("usher_jobs_agents", "Agents holding a lease.", nil, nil),
		total:   prometheus.NewDesc("usher_jobs_total", "Generic job events since the server started.", []string{"event"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queued, c.running, c.blocked, c.keys, c.agents, c.total} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.stats()
	if !ok {
		return
	}
	for _, q := range st.Queues {
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(q.Queued), q.Name)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(q.Running), q.Name)
		ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, float64(q.Blocked), q.Name)
	}
	for _, k := range st.Keys {
		ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(k.Running), k.Key)
	}
	ch <- prometheus.MustNewConstMetric(c.agents, prometheus.GaugeValue, float64(len(st.Agents)))
	n := st.Counters
	for event, v := range map[string]int64{"started": n.Started, "succeeded": n.Succeeded, "failed": n.Failed,
		"retried": n.Retried, "cancelled": n.Cancelled, "downgraded": n.Downgrades, "lease_expired": n.LeaseExpiries} {
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(v), event)
	}
}
