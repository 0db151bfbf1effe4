package jobsapi

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usherhq/usher/internal/jobs"
)

// DurationBuckets are the upper bounds, in seconds, of the queue wait and
// run time histograms: 5 ms to 4 h, about 2-2.5x apart below a minute
// and at the tiers' scale above (docs/operations.md, "Metrics").
var DurationBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
	60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400,
}

// Observer is a jobs.Observer that exports what it learns as Prometheus
// histograms and counters by queue: usher_jobs_queue_wait_seconds,
// usher_jobs_run_seconds and usher_jobs_outcomes_total. One Observer
// outlives the engines it serves (in multi-node mode, one per term of
// leadership), so that its counters never go back.
type Observer struct {
	wait, run *prometheus.HistogramVec
	outcomes  *prometheus.CounterVec

	mu     sync.RWMutex
	queues map[string]*queueSeries
}

// queueSeries are a queue's series, looked up once per queue.
type queueSeries struct {
	wait, run prometheus.Observer
	outcomes  [jobs.NumOutcomes]prometheus.Counter
}

// NewObserver returns an Observer; register it with a prometheus
// Registerer and hand it to the engine's Config.
func NewObserver() *Observer {
	return &Observer{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "usher_jobs_queue_wait_seconds",
			Help:    "How long generic jobs waited from ready (enqueued, due, backoff over) to their attempt's start, by queue.",
			Buckets: DurationBuckets}, []string{"queue"}),
		run: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "usher_jobs_run_seconds",
			Help:    "How long generic jobs' attempts ran, from start to their end, by queue.",
			Buckets: DurationBuckets}, []string{"queue"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "usher_jobs_outcomes_total",
			Help: "How generic jobs' attempts and unstarted jobs ended, by queue and outcome."}, []string{"queue", "outcome"}),
		queues: map[string]*queueSeries{},
	}
}

// Started implements jobs.Observer.
func (o *Observer) Started(queue string, wait time.Duration) {
	o.series(queue).wait.Observe(wait.Seconds())
}

// Ended implements jobs.Observer.
func (o *Observer) Ended(queue string, outcome jobs.Outcome, ran time.Duration, running bool) {
	s := o.series(queue)
	if outcome < jobs.NumOutcomes {
		s.outcomes[outcome].Inc()
	}
	if running {
		s.run.Observe(ran.Seconds())
	}
}

// series returns a queue's series, making them (every outcome at 0) the
// first time the queue is seen.
func (o *Observer) series(queue string) *queueSeries {
	o.mu.RLock()
	s := o.queues[queue]
	o.mu.RUnlock()
	if s != nil {
		return s
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s = o.queues[queue]; s != nil {
		return s
	}
	s = &queueSeries{wait: o.wait.WithLabelValues(queue), run: o.run.WithLabelValues(queue)}
	for k := range s.outcomes {
		s.outcomes[k] = o.outcomes.WithLabelValues(queue, jobs.Outcome(k).String())
	}
	o.queues[queue] = s
	return s
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	o.wait.Describe(ch)
	o.run.Describe(ch)
	o.outcomes.Describe(ch)
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.wait.Collect(ch)
	o.run.Collect(ch)
	o.outcomes.Collect(ch)
}

var _ jobs.Observer = (*Observer)(nil)
