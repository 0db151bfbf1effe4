package sched

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Queue-wait estimates (seed 000). A job's estimate depends only on the jobs
// ahead of it: the jobs of higher-priority queues and the earlier jobs of its
// own queue. They are placed one by one, in order, each at the earliest time
// a slot is free for its whole expected run in every tier limit it counts
// toward, without moving any job placed before it (conservative
// backfilling, as Slurm's start-time estimates). Running jobs hold their
// slots for their expected remaining time. Expected durations are learned
// per class from finished attempts and never exceed the tier's duration.
// Key, group and read/write limits are not modelled.

// learnedDurations keeps the mean duration per class: fixed tier t is class
// t; a default task that ran in tier t is class n+t.
type learnedDurations struct {
	mean []float64 // nanoseconds
	seen []int
	caps []float64
}

func (l *learnedDurations) init(tiers []Tier) {
	n := len(tiers)
	l.mean = make([]float64, 2*n)
	l.seen = make([]int, 2*n)
	l.caps = make([]float64, 2*n)
	for t, tier := range tiers {
		d := float64(tier.Duration)
		l.caps[t], l.caps[n+t] = d, d
		l.mean[t], l.mean[n+t] = d/2, d/2
	}
}

func (l *learnedDurations) class(j *job, tier int) int {
	if j.isDefault() {
		return len(l.mean)/2 + tier
	}
	return tier
}

// observe learns from a finished attempt: a running mean for the first 20
// samples of a class, then an exponential average that follows drift.
func (l *learnedDurations) observe(s *Scheduler, j *job, d time.Duration) {
	c := l.class(j, int(j.run.tier))
	x := min(float64(d), l.caps[c])
	l.seen[c]++
	alpha := 0.05
	if l.seen[c] < 20 {
		alpha = 1 / float64(l.seen[c])
	}
	l.mean[c] += alpha * (x - l.mean[c])
}

// remaining is the expected time left of a running attempt.
func (l *learnedDurations) remaining(j *job, elapsed float64) float64 {
	c := l.class(j, int(j.run.tier))
	exp, limit := l.mean[c], l.caps[c]
	if elapsed < exp {
		return exp - elapsed
	}
	// Past its expected end: assume it ends soon, within its limit.
	return max(0, min(limit-elapsed, exp)/2)
}

// Estimate is a queued job's expected wait.
type Estimate struct {
	JobID string
	// Position counts from 0 within the job's queue.
	Position int
	Wait     time.Duration
	// Known is false when no worker could ever run the job (no slots).
	Known bool
}

// Estimates returns the expected wait of the first max queued jobs of a
// queue, in queue order. It costs O(m²) in the number of jobs considered.
func (s *Scheduler) Estimates(queueName string, max int) ([]Estimate, error) {
	q, ok := s.queues[queueName]
	if !ok {
		return nil, fmt.Errorf("queue %q: %w", queueName, ErrUnknownQueue)
	}
	if max < 0 {
		return nil, fmt.Errorf("%w: %d is negative", ErrInvalidBatch, max)
	}
	now := s.nowNS()
	p := s.runningProfile(now)
	for _, other := range s.byPrio {
		if other == q || other.spec.Priority < q.spec.Priority {
			break
		}
		if other.spec.Priority > q.spec.Priority && !other.spec.Paused {
			for _, j := range s.queuedInOrder(other, max) {
				p.place(now, s.expected(j), int(j.tier))
			}
		}
	}
	mine := s.queuedInOrder(q, max)
	out := make([]Estimate, len(mine))
	for i, j := range mine {
		at := p.place(now, s.expected(j), int(j.tier))
		out[i] = Estimate{JobID: j.id, Position: i, Known: at >= 0}
		if at >= 0 {
			out[i].Wait = time.Duration(at - now)
		}
	}
	return out, nil
}

// expected is a queued job's expected run time. Default tasks are modelled
// as fast tasks: with a queue in front of them, seed 000 runs them as fast.
func (s *Scheduler) expected(j *job) int64 {
	return int64(s.learned.mean[s.learned.class(j, int(j.tier))])
}

// queuedInOrder lists up to max of the queue's ready jobs in queue order.
func (s *Scheduler) queuedInOrder(q *queue, max int) []*job {
	var all []jobEntry
	if q.strictOrder() {
		all = slices.Clone(q.strict)
	} else {
		for _, b := range q.buckets {
			for _, bt := range b.tiers {
				all = append(all, bt.jobs...)
			}
		}
	}
	slices.SortFunc(all, func(a, b jobEntry) int { return cmp.Compare(a.key, b.key) })
	out := make([]*job, 0, min(len(all), max))
	for _, e := range all[:min(len(all), max)] {
		out = append(out, e.j)
	}
	return out
}

// runningProfile starts the model with the running jobs' expected remaining
// times. Interactive tasks are left out: a waiting job would halt them.
func (s *Scheduler) runningProfile(now int64) *profile {
	p := newProfile(now, s.limits)
	for _, w := range s.workers {
		for _, j := range w.jobs {
			if j.isInteractive() {
				continue
			}
			rem := int64(s.learned.remaining(j, float64(now-j.run.started)))
			p.reserve(now, now+max(rem, 1), int(j.run.tier))
		}
	}
	return p
}

// profile is the free capacity of each tier limit over time, as segments:
// segment i covers [times[i], times[i+1]), the last one runs forever.
type profile struct {
	levels int
	times  []int64
	free   []int32 // levels entries per segment
}

func newProfile(now int64, limits []int) *profile {
	p := &profile{levels: len(limits), times: []int64{now}, free: make([]int32, len(limits))}
	for k, l := range limits {
		p.free[k] = int32(l)
	}
	return p
}

// split makes t a segment boundary and returns the index of the segment
// that starts at t.
func (p *profile) split(t int64) int {
	i, found := slices.BinarySearch(p.times, t)
	if found {
		return i
	}
	// Segment i-1 contains t: copy its capacities into a new segment at i.
	p.times = slices.Insert(p.times, i, t)
	prev := p.free[(i-1)*p.levels : i*p.levels]
	p.free = slices.Insert(p.free, i*p.levels, prev...)
	return i
}

func (p *profile) reserve(from, to int64, tier int) {
	a, b := p.split(from), p.split(to)
	for i := a; i < b; i++ {
		for k := 0; k <= tier; k++ {
			p.free[i*p.levels+k]--
		}
	}
}

func (p *profile) fits(i, tier int) bool {
	for k := 0; k <= tier; k++ {
		if p.free[i*p.levels+k] <= 0 {
			return false
		}
	}
	return true
}

// place reserves the earliest window of length d from now where the tier
// has room throughout, and returns its start (-1 when it never has room).
func (p *profile) place(now, d int64, tier int) int64 {
	last := len(p.times) - 1
	if !p.fits(last, tier) {
		return -1
	}
	d = max(d, 1)
	start, i := now, 0
	for i <= last {
		if !p.fits(i, tier) {
			i++
			start = p.times[i]
			continue
		}
		if i == last || p.times[i+1] >= start+d {
			break
		}
		i++
	}
	p.reserve(start, start+d, tier)
	return start
}
