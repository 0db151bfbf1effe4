package sched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Queue-wait estimates (docs/design.md, "Queue-wait estimates"). A job's
// estimate depends only on the jobs ahead of it: the jobs of higher-priority
// queues and the earlier jobs of its own queue. The model runs the tier rules
// forward (see forecast): from now, at each modelled end, the cycle starts the
// first queued job that has room in every tier limit it counts toward, again
// and again. Later jobs thus fill the slots a blocked slow or medium head
// cannot use, as the cycle's "ignored for the rest of the cycle" lets them, and
// a blocked head waits for an end in its own tier or a slower one, which frees
// a slot in every faster limit too: a job behind never delays a job ahead.
//
// Default tasks are modelled as fast tasks, queued and running: whenever a
// job waits, the cycle downgrades running default tasks to fast (and stops
// those that ran longer), and a default task that starts while others wait
// is downgraded at once. Interactive tasks are left out: a waiting job would
// halt them. Key, group and read/write limits and capabilities are not
// modelled, and a random queue is estimated as if it were FIFO.
//
// Ends are not points. Every started job, running or queued, ends at a time
// drawn from its class's learned run-time distribution (learnedDurations;
// never above the tier's duration), for a running job conditioned on the
// time it has run. The jobs of a tier free their slots one by one, the r-th
// when the expected number of them that have ended reaches r − ½: about the
// median of the time of the r-th end. So with eight running jobs the first
// slot frees well before the smallest expected remaining time; and once
// queued jobs have started in the slots that freed, the next slot frees at
// the first end among all of them, well before any one's mean run time.
//
// The estimate is therefore the median of the wait the model predicts, not
// its mean: about half the jobs told a wait wait less, half wait more. A
// wait is skewed (a few long runs ahead make it long, nothing makes it
// shorter than the first end) and a client reads it as "about this long":
// the median is the typical wait, the value off by the smallest factor in
// the typical case (it minimizes the expected |log estimate − log wait|),
// and one long run ahead does not drag it the way it drags the mean.
// An earlier model placed each queued job for its mean run time in the
// slot it took, which told too long a wait to jobs deep in the queue
// (docs/benchmarks.md, "Queue-wait estimates").

// runStepCount is the number of steps a queued job's run time is told in,
// each about a quarter of the chance. The sweep's cost grows with the
// steps, and in BenchmarkEstimateAccuracy 8 or 16 steps give the same error
// within 0.002 at every load. A running job keeps a step per bin: the
// first ends, which short waits hang on, need the resolution (4 steps for
// them too cost 0.006 of median error at load 0.80).
const runStepCount = 4

// durationBins is the resolution of a learned duration distribution.
const durationBins = 32

// learnRate makes each sample weigh 1/(1-learnRate) times the one before it:
// the first samples average evenly, later ones follow drift over about
// 1/learnRate samples.
const learnRate = 0.005

// durationClass is the learned distribution of one class's run times, as a
// histogram over [0, limit]. Each bin keeps the weight and the weighted sum
// of its samples and stands for a point mass at their mean, so that a class
// whose samples are all alike is learned exactly.
type durationClass struct {
	limit  float64 // nanoseconds: the tier's duration
	weight [durationBins]float64
	sum    [durationBins]float64
	total  float64
	next   float64 // weight of the next sample
}

func newDurationClass(limit time.Duration) durationClass {
	return durationClass{limit: float64(limit), next: 1}
}

func (c *durationClass) observe(x float64) {
	x = min(max(x, 0), c.limit)
	b := min(int(x/c.limit*durationBins), durationBins-1)
	c.weight[b] += c.next
	c.sum[b] += c.next * x
	c.total += c.next
	c.next /= 1 - learnRate
	if c.next > 1e100 {
		for i := range c.weight {
			c.weight[i] /= c.next
			c.sum[i] /= c.next
		}
		c.total /= c.next
		c.next = 1
	}
}

// mean is the expected run time; half the limit before any sample.
func (c *durationClass) mean() float64 {
	if c.total == 0 {
		return c.limit / 2
	}
	s := 0.0
	for _, v := range c.sum {
		s += v
	}
	return min(s/c.total, c.limit)
}

// step is a chance that a job ends at a time after a reference: now for a
// running job's time left, its start for a queued job's run.
type step struct {
	at int64
	p  float64
}

// endSteps appends the distribution of the time left of a run that has
// lasted elapsed and is cut at cut: a step per bin whose mean is later than
// elapsed, conditioned on the run not having ended yet. With no sample, or
// when the run outlasted every sample, it is one step at the time it is
// expected to need still.
func (c *durationClass) endSteps(out []step, elapsed, cut float64) []step {
	if elapsed >= cut {
		return append(out, step{at: 0, p: 1})
	}
	mass := 0.0
	for b, w := range c.weight {
		if w > 0 && c.sum[b]/w > elapsed {
			mass += w
		}
	}
	if c.total == 0 || mass < 1e-9*c.total {
		left := (cut - elapsed) / 2 // uniform prior over what is left
		if c.total > 0 {
			left = min(left, c.limit/durationBins/2) // it should end soon
		}
		return append(out, step{at: int64(math.Round(left)), p: 1})
	}
	for b, w := range c.weight {
		if w == 0 {
			continue
		}
		if m := c.sum[b] / w; m > elapsed {
			out = append(out, step{at: int64(math.Round(min(m, cut) - elapsed)), p: w / mass})
		}
	}
	return out
}

// runSteps appends the distribution of a new run's time in at most
// runStepCount steps of about equal chance: consecutive bins are merged
// into one step at their mean (at least 1 ns). Before any sample, it is one
// step at half the limit.
func (c *durationClass) runSteps(out []step) []step {
	if c.total == 0 {
		return append(out, step{at: int64(math.Round(c.limit / 2)), p: 1})
	}
	var w, sum, below float64 // the step being merged; the mass before it
	for b, bw := range c.weight {
		if bw == 0 {
			continue
		}
		w, sum = w+bw, sum+c.sum[b]
		// Close the step once it reaches the next multiple of the share.
		if math.Floor((below+w)/c.total*runStepCount+1e-9) > math.Floor(below/c.total*runStepCount+1e-9) {
			out = append(out, step{at: max(int64(math.Round(sum/w)), 1), p: w / c.total})
			below, w, sum = below+w, 0, 0
		}
	}
	if w > 0 {
		out = append(out, step{at: max(int64(math.Round(sum/w)), 1), p: w / c.total})
	}
	return out
}

// learnedDurations keeps a distribution per class: class t for the tasks
// of fixed tier t, and class n for default tasks, whose run times are
// learned cut at the fastest tier's duration: that is how long they run
// while anything waits, and every finished default task tells it exactly
// (one stopped after the fast duration would have been stopped then too).
type learnedDurations struct {
	classes []durationClass
}

func (l *learnedDurations) init(tiers []Tier) {
	n := len(tiers)
	l.classes = make([]durationClass, n+1)
	for t, tier := range tiers {
		l.classes[t] = newDurationClass(tier.Duration)
	}
	l.classes[n] = newDurationClass(tiers[0].Duration)
}

// class is the distribution a job's run time is drawn from.
func (l *learnedDurations) class(j *job) *durationClass {
	return &l.classes[l.classIndex(j)]
}

// classIndex is the index in classes of a job's distribution.
func (l *learnedDurations) classIndex(j *job) int {
	if j.isDefault() {
		return len(l.classes) - 1
	}
	return int(j.tier)
}

// observe learns from a finished attempt; the sample is capped at the
// class's limit.
func (l *learnedDurations) observe(j *job, d time.Duration) {
	l.class(j).observe(float64(d))
}

// Estimate is a queued job's estimated wait: the median of the wait the
// model predicts.
type Estimate struct {
	JobID string
	// Position counts from 0 within the job's queue.
	Position int
	Wait     time.Duration
	// Known is false when no worker could ever run the job (no slots).
	Known bool
}

// ChangedFrom says whether a client told prev should be told e: the job is
// another, it became (un)known, or its wait moved by at least a second and
// by at least a tenth of the wait it was told.
func (e Estimate) ChangedFrom(prev Estimate) bool {
	if e.JobID != prev.JobID || e.Known != prev.Known {
		return true
	}
	d := e.Wait - prev.Wait
	if d < 0 {
		d = -d
	}
	return d >= time.Second && 10*d >= prev.Wait
}

// Estimates returns the estimated wait of the first max queued jobs of a
// queue, in queue order, computed from the running jobs and the queued jobs
// ahead of each (those of higher-priority queues, up to max per queue, and
// the earlier ones of this queue). It costs O(b + (r·k + m·k')·log(r + m))
// for b buckets of queued jobs, r running jobs, m queued jobs modelled,
// k = durationBins and k' = runStepCount: about 0.1 ms for 100 queued and
// 64 running jobs, 0.6 ms for 1,000 queued (BenchmarkEstimates).
func (s *Scheduler) Estimates(queueName string, max int) ([]Estimate, error) {
	q, ok := s.queues[queueName]
	if !ok {
		return nil, fmt.Errorf("queue %q: %w", queueName, ErrUnknownQueue)
	}
	if max < 0 {
		return nil, fmt.Errorf("%w: %d is negative", ErrInvalidBatch, max)
	}
	now := s.nowNS()
	f := s.newForecast(now)
	for _, other := range s.byPrio {
		if other == q || other.spec.Priority < q.spec.Priority {
			break
		}
		if other.spec.Priority > q.spec.Priority && !other.spec.Paused {
			for _, j := range s.queuedInOrder(other, max) {
				f.queue(s.learned.classIndex(j), int(j.tier), false)
			}
		}
	}
	mine := s.queuedInOrder(q, max)
	for _, j := range mine {
		f.queue(s.learned.classIndex(j), int(j.tier), true)
	}
	starts := f.run()
	out := make([]Estimate, len(mine))
	for i, j := range mine {
		at := starts[i]
		out[i] = Estimate{JobID: j.id, Position: i, Known: at >= 0}
		if at >= 0 {
			out[i].Wait = time.Duration(at - now)
		}
	}
	return out, nil
}

// queuedInOrder lists up to max of the queue's ready jobs in queue order.
func (s *Scheduler) queuedInOrder(q *queue, max int) []*job {
	var all []jobEntry
	if q.strictOrder() {
		all = slices.Clone(q.strict)
	} else {
		for _, b := range q.buckets {
			for slot := b.head; slot != noSlot; slot = s.jobs.At(slot).next {
				all = append(all, jobEntry{s.jobs.At(slot).key, slot})
			}
			if q.spec.Order != OrderRandom {
				continue
			}
			for _, slot := range *s.jobSet(b) {
				all = append(all, jobEntry{s.jobs.At(slot).key, slot})
			}
		}
	}
	slices.SortFunc(all, func(a, b jobEntry) int { return cmp.Compare(a.key, b.key) })
	out := make([]*job, 0, min(len(all), max))
	for _, e := range all[:min(len(all), max)] {
		out = append(out, s.jobs.At(e.slot))
	}
	return out
}
