package jobsapi

import (
	"cmp"
	"slices"

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
	keyLimit, keyQueued, keyTokens *prometheus.Desc
	limitedKeys                    *prometheus.Desc
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
		stats:       stats,
		queued:      prometheus.NewDesc("usher_jobs_queued", "Generic jobs ready to run, by queue.", []string{"queue"}, nil),
		running:     prometheus.NewDesc("usher_jobs_running", "Generic jobs running, by queue.", []string{"queue"}, nil),
		blocked:     prometheus.NewDesc("usher_jobs_blocked", "Ready jobs held back by a key, group or read/write gate, by queue.", []string{"queue"}, nil),
		keys:        prometheus.NewDesc("usher_jobs_key_running", "Running jobs holding a key with a limit or rate (the busiest keys; the rest summed as key=\"other\").", []string{"key"}, nil),
		keyLimit:    prometheus.NewDesc("usher_jobs_key_limit", "A key's concurrency limit (0: a rate only; summed for key=\"other\").", []string{"key"}, nil),
		keyQueued:   prometheus.NewDesc("usher_jobs_key_queued", "Ready jobs holding a key with a limit or rate.", []string{"key"}, nil),
		keyTokens:   prometheus.NewDesc("usher_jobs_key_tokens", "Tokens in a rated key's bucket now.", []string{"key"}, nil),
		limitedKeys: prometheus.NewDesc("usher_jobs_limited_keys", "Keys in use that have a limit or rate, exported or summed under key=\"other\".", nil, nil),
		agents:      prometheus.NewDesc("usher_jobs_agents", "Agents holding a lease.", nil, nil),
		total:       prometheus.NewDesc("usher_jobs_total", "Generic job events since the server started.", []string{"event"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queued, c.running, c.blocked, c.keys, c.agents, c.total,
		c.keyLimit, c.keyQueued, c.keyTokens, c.limitedKeys} {
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
	c.collectKeys(ch, st.Keys)
	ch <- prometheus.MustNewConstMetric(c.agents, prometheus.GaugeValue, float64(len(st.Agents)))
	n := st.Counters
	for event, v := range map[string]int64{"started": n.Started, "succeeded": n.Succeeded, "failed": n.Failed,
		"retried": n.Retried, "cancelled": n.Cancelled, "downgraded": n.Downgrades, "lease_expired": n.LeaseExpiries,
		"snoozed": n.Snoozed, "timed_out": n.TimedOut, "expired": n.Expired} {
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(v), event)
	}
}

// MaxKeySeries caps the keys whose use is exported one by one: the
// busiest keys with a limit or rate (most running, then most queued, then
// by name); the others are summed under the key OtherKey, so that keys
// made from data (one per host, per customer) cannot grow the series
// without bound (docs/operations.md, "Metrics").
const MaxKeySeries = 20

// OtherKey labels the sum of the keys beyond MaxKeySeries. A key that is
// itself named so is always counted in that sum.
const OtherKey = "other"

// collectKeys exports the use of the keys with a limit or rate, capped at
// MaxKeySeries keys and the sum of the rest.
func (c *Collector) collectKeys(ch chan<- prometheus.Metric, all []jobtype.KeyStats) {
	keys := make([]jobtype.KeyStats, 0, len(all))
	for _, k := range all {
		if k.Limit > 0 || k.Tokens != nil {
			keys = append(keys, k)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.limitedKeys, prometheus.GaugeValue, float64(len(keys)))
	slices.SortFunc(keys, func(a, b jobtype.KeyStats) int {
		if (a.Key == OtherKey) != (b.Key == OtherKey) { // the key named "other" goes with the rest
			if a.Key == OtherKey {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(b.Running, a.Running), cmp.Compare(b.Queued, a.Queued), cmp.Compare(a.Key, b.Key))
	})
	n := min(len(keys), MaxKeySeries)
	if n > 0 && keys[n-1].Key == OtherKey {
		n--
	}
	for _, k := range keys[:n] {
		c.keyMetrics(ch, k.Key, k.Running, k.Limit, k.Queued, k.Tokens)
	}
	if len(keys) == n {
		return
	}
	var sum jobtype.KeyStats
	var tokens *int
	for _, k := range keys[n:] {
		sum.Running, sum.Limit, sum.Queued = sum.Running+k.Running, sum.Limit+k.Limit, sum.Queued+k.Queued
		if k.Tokens != nil {
			if tokens == nil {
				tokens = new(int)
			}
			*tokens += *k.Tokens
		}
	}
	c.keyMetrics(ch, OtherKey, sum.Running, sum.Limit, sum.Queued, tokens)
}

func (c *Collector) keyMetrics(ch chan<- prometheus.Metric, key string, running, limit, queued int, tokens *int) {
	ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(running), key)
	ch <- prometheus.MustNewConstMetric(c.keyLimit, prometheus.GaugeValue, float64(limit), key)
	ch <- prometheus.MustNewConstMetric(c.keyQueued, prometheus.GaugeValue, float64(queued), key)
	if tokens != nil {
		ch <- prometheus.MustNewConstMetric(c.keyTokens, prometheus.GaugeValue, float64(*tokens), key)
	}
}
