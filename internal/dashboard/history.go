package dashboard

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// The history of the last hour (docs/operations.md, "The dashboard"): a
// sample every SampleEvery, HistorySamples of them. A sample is closed
// SampleSettle after its interval ends, so that counts the queue servers
// hand on late (multi-node mode, once a second) are in it.
const (
	SampleEvery    = 10 * time.Second
	HistorySamples = 360
	SampleSettle   = 3 * time.Second
)

// Gauges are the load at one look: tasks waiting by class (fast, medium,
// slow, default) and running by tier, with "interactive" for interactive
// tasks.
type Gauges struct {
	Waiting map[string]int
	Running map[string]int
}

// GaugesOf reads the gauges from a dashboard state: every tier and class
// appears, with 0 when none.
func GaugesOf(st State) Gauges {
	g := Gauges{Waiting: map[string]int{"default": 0}, Running: map[string]int{"interactive": 0}}
	for _, t := range st.Tiers {
		g.Waiting[t.Name] = 0
		g.Running[t.Name] = t.Running
	}
	for _, q := range st.Queue {
		if q.Class != "" {
			g.Waiting[q.Class]++
		}
	}
	for _, r := range st.Running {
		if r.Interactive {
			g.Running["interactive"]++
		}
	}
	return g
}

// peak keeps the larger of each gauge.
func (g *Gauges) peak(o Gauges) {
	if g.Waiting == nil {
		g.Waiting, g.Running = map[string]int{}, map[string]int{}
	}
	for k, v := range o.Waiting {
		g.Waiting[k] = max(g.Waiting[k], v)
	}
	for k, v := range o.Running {
		g.Running[k] = max(g.Running[k], v)
	}
}

// Sample is one interval of the history. Nothing in it names a task, a
// client or what a task holds.
type Sample struct {
	// T is when the interval began, in Unix milliseconds.
	T int64 `json:"t"`
	// Waiting and Running are the most tasks seen waiting (by class) and
	// running (by tier, and interactive) at the looks during the interval.
	Waiting map[string]int `json:"waiting"`
	Running map[string]int `json:"running"`
	// Done and Failed count the tasks that ended; Denied the denials, which
	// Denials splits by reason.
	Done    int64            `json:"done"`
	Failed  int64            `json:"failed"`
	Denied  int64            `json:"denied"`
	Denials map[string]int64 `json:"denials,omitempty"`
	// CacheHits and CacheMisses count result cache lookups.
	CacheHits   int64 `json:"cacheHits"`
	CacheMisses int64 `json:"cacheMisses"`
	// CompileMS and WaitMS are the p50, p90 and p99 of compile times and
	// queue waits in the interval, absent when there were none.
	CompileMS *Quantiles `json:"compileMs,omitempty"`
	WaitMS    *Quantiles `json:"waitMs,omitempty"`
}

// NewSample makes interval i's sample from its peak gauges and counts.
func NewSample(i int64, every time.Duration, g Gauges, c Counts) Sample {
	s := Sample{T: i * every.Milliseconds(), Waiting: g.Waiting, Running: g.Running,
		Done: c.Done, Failed: c.Failed, CacheHits: c.CacheHits, CacheMisses: c.CacheMisses,
		CompileMS: c.Compile.quantiles(), WaitMS: c.Wait.quantiles()}
	if len(c.Denials) > 0 {
		s.Denials = maps.Clone(c.Denials)
	}
	for _, n := range c.Denials {
		s.Denied += n
	}
	return s
}

// ParseSample reads a sample as Encode wrote it.
func ParseSample(b []byte) (Sample, error) {
	var s Sample
	if err := json.Unmarshal(b, &s); err != nil {
		return Sample{}, fmt.Errorf("dashboard sample: %w", err)
	}
	if s.T <= 0 {
		return Sample{}, fmt.Errorf("dashboard sample: no time")
	}
	return s, nil
}

// Encode writes s as JSON.
func (s Sample) Encode() []byte {
	b, _ := json.Marshal(s) // maps of strings, numbers: cannot fail
	return b
}

// Sampler turns looks at the load into samples: it keeps each open
// interval's peak gauges and says which intervals are due. It does no I/O
// and reads no clock; it is not safe for concurrent use.
type Sampler struct {
	every, settle time.Duration
	peaks         map[int64]Gauges
	closed        int64 // the newest interval sampled
}

// NewSampler returns a sampler of intervals of length every, each due
// settle after it ends.
func NewSampler(every, settle time.Duration) *Sampler {
	return &Sampler{every: every, settle: settle, peaks: map[int64]Gauges{}}
}

// Resume makes the sampler skip intervals up to and including the one
// that began at t (Unix ms): a new leader's first sample follows the last
// one its predecessor wrote, even when its clock runs behind the
// predecessor's.
func (s *Sampler) Resume(t int64) {
	s.closed = max(s.closed, t/s.every.Milliseconds())
	maps.DeleteFunc(s.peaks, func(i int64, _ Gauges) bool { return i <= s.closed })
}

// Look records the gauges seen at now and returns the intervals now due,
// oldest first. Only intervals with a look are sampled: a gap in the looks
// (no leader) is a gap in the history.
func (s *Sampler) Look(now time.Time, g Gauges) []int64 {
	if i := IntervalOf(now, s.every); i > s.closed {
		p := s.peaks[i]
		p.peak(g)
		s.peaks[i] = p
	}
	var due []int64
	for i := range s.peaks {
		if !now.Before(time.UnixMilli((i + 1) * s.every.Milliseconds()).Add(s.settle)) {
			due = append(due, i)
		}
	}
	slices.Sort(due)
	return due
}

// Note makes the sampler sample interval i although it may have no look
// in it (counts were seen in it), unless i is sampled already.
func (s *Sampler) Note(i int64) {
	if _, ok := s.peaks[i]; !ok && i > s.closed {
		s.peaks[i] = Gauges{}
	}
}

// Close makes interval i's sample from its peaks and counts c.
func (s *Sampler) Close(i int64, c Counts) Sample {
	g := s.peaks[i]
	delete(s.peaks, i)
	s.closed = max(s.closed, i)
	return NewSample(i, s.every, g, c)
}

// History is the last hour of samples as /api/dashboard sends it: the
// first snapshot of a stream carries every sample, later ones only those
// new since the previous snapshot.
type History struct {
	IntervalMS int64    `json:"intervalMs"`
	Samples    []Sample `json:"samples"` // oldest first
}

// Ring keeps the newest HistorySamples samples. It is safe for concurrent
// use.
type Ring struct {
	mu      sync.Mutex
	samples []Sample
}

// NewRing returns an empty ring.
func NewRing() *Ring { return &Ring{} }

func (r *Ring) lock()   { r.mu.Lock() }
func (r *Ring) unlock() { r.mu.Unlock() }

// Add appends s, forgetting the oldest beyond HistorySamples and any
// sample older than the window before s. A sample not newer than the
// newest is ignored.
func (r *Ring) Add(s Sample) {
	r.lock()
	defer r.unlock()
	if n := len(r.samples); n > 0 && s.T <= r.samples[n-1].T {
		return
	}
	r.samples = append(r.samples, s)
	cut := s.T - int64(HistorySamples)*SampleEvery.Milliseconds()
	i := 0
	for i < len(r.samples) && (len(r.samples)-i > HistorySamples || r.samples[i].T <= cut) {
		i++
	}
	r.samples = slices.Delete(r.samples, 0, i)
}

// Replace sets the ring's samples (oldest first), keeping the newest
// HistorySamples.
func (r *Ring) Replace(samples []Sample) {
	r.lock()
	r.samples = nil
	r.unlock()
	for _, s := range samples {
		r.Add(s)
	}
}

// Newest is the newest sample's time (0 when empty).
func (r *Ring) Newest() int64 {
	r.lock()
	defer r.unlock()
	if len(r.samples) == 0 {
		return 0
	}
	return r.samples[len(r.samples)-1].T
}

// History returns every sample.
func (r *Ring) History() *History {
	r.lock()
	defer r.unlock()
	return &History{IntervalMS: SampleEvery.Milliseconds(), Samples: slices.Clone(r.samples)}
}

// Since returns h with only the samples after t (Unix ms).
func (h *History) Since(t int64) *History {
	i := 0
	for i < len(h.Samples) && h.Samples[i].T <= t {
		i++
	}
	return &History{IntervalMS: h.IntervalMS, Samples: h.Samples[i:]}
}

// Newest is the newest sample's time (0 when empty).
func (h *History) Newest() int64 {
	if h == nil || len(h.Samples) == 0 {
		return 0
	}
	return h.Samples[len(h.Samples)-1].T
}

// Recorder keeps the history in-process (single-node mode): the caller
// looks at the load once a second, the queue server's sessions count into
// Tally, and each due interval becomes a sample in the ring. It is safe
// for concurrent use.
type Recorder struct {
	Tally   *Tally
	ring    *Ring
	mu      sync.Mutex
	sampler *Sampler
}

// NewRecorder returns a recorder whose tally reads the time from now
// (time.Now when nil).
func NewRecorder(now func() time.Time) *Recorder {
	return &Recorder{Tally: NewTally(SampleEvery, now), ring: NewRing(), sampler: NewSampler(SampleEvery, 0)}
}

// Look records the gauges seen at now and samples the intervals now due.
func (r *Recorder) Look(now time.Time, g Gauges) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range r.Tally.intervals() {
		r.sampler.Note(i)
	}
	for _, i := range r.sampler.Look(now, g) {
		r.ring.Add(r.sampler.Close(i, r.Tally.Take(i)))
		r.Tally.Forget(i)
	}
}

// History returns the samples of the last hour.
func (r *Recorder) History() *History { return r.ring.History() }
