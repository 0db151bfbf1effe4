package sched

import (
	"fmt"
	"math"
	"time"
)

// Duration tiers (docs/design.md, "Duration tiers and preemption"), generalized
// to n tiers (0 = fastest). A job running in tier t counts toward the limits of
// tiers 0..t; count(k) is the number of running jobs in tier k or slower.
// limits[0] is every slot.

func (s *Scheduler) count(k int) int {
	c := 0
	for t := k; t < len(s.running); t++ {
		c += s.running[t]
	}
	return c
}

func (s *Scheduler) atLimit(k int) bool { return s.count(k) >= s.limits[k] }

// largestTier is the slowest tier a job starting on a free slot may run in:
// the largest t with room in every limit 1..t. Tier 0's limit (every slot)
// is the free slot itself; a worker whose slots fell under load must not
// push a default task on another worker's free slot down to tier 0.
func (s *Scheduler) largestTier() int {
	best := 0
	for t := 1; t < len(s.tiers); t++ {
		if s.atLimit(t) {
			break
		}
		best = t
	}
	return best
}

// recomputeTierLimits derives the effective limits from the slot count:
// tier 0 gets every slot; each slower tier its Limit or its Share of the
// slots (rounded up, at least 1), never more than the faster tier.
func (s *Scheduler) recomputeTierLimits() {
	for k, t := range s.tiers {
		var l int
		switch {
		case k == 0:
			l = s.totalSlots
		case t.Share > 0:
			l = max(1, int(math.Ceil(t.Share*float64(s.totalSlots)-1e-9)))
		default:
			l = t.Limit
		}
		if k > 0 {
			l = min(l, s.limits[k-1])
		}
		if l < s.count(k) {
			s.tierLow[k] = s.startSeq
		}
		s.limits[k] = l
	}
}

// SetTierLimits replaces the Limit of tiers 1..n-1 (limits[0] is ignored:
// tier 0 is always every slot). The limits must be at least 1 and must not
// increase; on error nothing changes.
func (s *Scheduler) SetTierLimits(limits []int) error {
	if len(limits) != len(s.tiers) {
		return fmt.Errorf("%w: %d limits for %d tiers", ErrInvalidTiers, len(limits), len(s.tiers))
	}
	next := make([]Tier, len(s.tiers))
	copy(next, s.tiers)
	for k := 1; k < len(next); k++ {
		next[k].Limit, next[k].Share = limits[k], 0
	}
	if err := validateTiers(next); err != nil {
		return err
	}
	s.tiers = next
	s.recomputeTierLimits()
	return nil
}

// TierLimits returns the effective limit of each tier.
func (s *Scheduler) TierLimits() []int { return append([]int(nil), s.limits...) }

// tierSteps runs the tier steps of the queue cycle for queue q, starting
// from its head h: for each tier k from the slowest down to 1, if the head
// needs tier k or slower and limit k is reached, a running default task is
// downgraded to make room; if the limit is still reached, tiers k and
// slower are ignored for the rest of the cycle (*below = k) and the head is
// taken again. It returns the first unignored head and its bucket hb, or
// nil. It reads the head's tier from its bucket (jobs of a bucket share
// their tier), whose record the head's start needs anyway.
func (s *Scheduler) tierSteps(q *queue, below *int, h *job, hb *bucket) (*job, *bucket) {
	if h == nil || hb.tier == 0 { // no tier k ≥ 1 to step through (fast and default tasks)
		return h, hb
	}
	for k := len(s.tiers) - 1; k >= 1 && h != nil; k-- {
		if int(hb.tier) < k || !s.atLimit(k) {
			continue
		}
		s.downgradeForHead(k)
		if s.atLimit(k) {
			*below = k
			h, hb = s.head(q, k)
		}
	}
	return h, hb
}

// downgradeForHead makes room in tier k for a waiting head: a random default
// task running in the slowest tier ≥ k that has one is moved to the slowest
// faster tier j < k whose limit is not reached, or to tier 0. For three tiers
// this is the rule as the design states it: a slow head moves a slow default to
// medium, or to fast when the medium limit is reached too; a medium head moves
// a slow default to fast, else a medium default to fast.
func (s *Scheduler) downgradeForHead(k int) {
	victim := s.randomDefault(k)
	if victim == nil {
		return
	}
	to := 0
	for j := k - 1; j >= 1; j-- {
		if !s.atLimit(j) {
			to = j
			break
		}
	}
	s.downgrade(victim, to)
}

// randomDefault picks a random default task running in the slowest tier
// ≥ from that has one.
func (s *Scheduler) randomDefault(from int) *job {
	for t := len(s.tiers) - 1; t >= from; t-- {
		if set := s.defaults[t]; len(set) > 0 {
			return set[s.rng.IntN(len(set))]
		}
	}
	return nil
}

// downgradeAll moves every default task running in tier 1 or slower to tier
// 0 (the cycle's step when the fast limit is reached).
func (s *Scheduler) downgradeAll() {
	for t := len(s.tiers) - 1; t >= 1; t-- {
		for len(s.defaults[t]) > 0 {
			s.downgrade(s.defaults[t][len(s.defaults[t])-1], 0)
		}
	}
}

// downgrade moves a running default task to a faster tier and tells the
// driver, with StopNow when the task already ran past the new tier.
func (s *Scheduler) downgrade(j *job, to int) {
	s.setRunTier(j, to)
	s.setLimit(j)
	r := s.run(j)
	s.stats.Downgrades++
	d := s.tiers[to].Duration
	elapsed := time.Duration(s.nowNS() - r.started)
	s.emit(Event{Kind: EventDowngraded, JobID: j.id, WorkerID: r.worker.id, Attempt: int(j.attempt),
		Tier: to, Duration: d, StopNow: elapsed >= d})
}

// setRunTier moves a running job between tiers (and default sets).
func (s *Scheduler) setRunTier(j *job, to int) {
	r := s.run(j)
	s.running[r.tier]--
	if j.isDefault() {
		s.removeFromSet(&s.defaults[r.tier], j)
	}
	r.tier = int8(to)
	s.running[to]++
	if j.isDefault() {
		s.addToSet(&s.defaults[to], j)
	}
}

func (s *Scheduler) addToSet(set *[]*job, j *job) {
	s.run(j).cpos = int32(len(*set))
	*set = append(*set, j)
}

func (s *Scheduler) removeFromSet(set *[]*job, j *job) {
	i, last := s.run(j).cpos, len(*set)-1
	if int(i) != last {
		(*set)[i] = (*set)[last]
		s.run((*set)[i]).cpos = i
	}
	(*set)[last] = nil
	*set = (*set)[:last]
}

// haltForQueue halts a random interactive task on a worker of pool p (the
// fast limit is reached): its slot is free at once. It reports whether
// one was halted.
func (s *Scheduler) haltForQueue(p *pool) bool {
	n := 0
	for _, j := range s.interactive {
		if s.run(j).worker.pool == p {
			n++
		}
	}
	if n == 0 {
		return false
	}
	pick := s.rng.IntN(n)
	for _, j := range s.interactive {
		if s.run(j).worker.pool != p {
			continue
		}
		if pick == 0 {
			s.halt(j)
			return true
		}
		pick--
	}
	return false
}

func (s *Scheduler) halt(j *job) {
	w, attempt := s.run(j).worker, int(j.attempt)
	s.release(j)
	s.stats.Halts++
	s.emit(Event{Kind: EventHalted, JobID: j.id, WorkerID: w.id, Attempt: attempt})
	s.forget(j, false)
}

// StartInteractive starts an interactive task at once on a free push worker
// that serves its queue, in tier 0. Interactive tasks never queue: with no
// free slot the task is denied (ErrDenied) and, as the tier rules say, one
// default task is downgraded by one tier (a random one from the slowest
// tier that has one). A paused queue starts nothing: its interactive tasks
// are denied too (ErrDenied), without a downgrade. Dependencies, keys and
// groups are not allowed.
func (s *Scheduler) StartInteractive(spec JobSpec) (Assignment, error) {
	spec.Default, spec.Tier = false, 0
	if err := s.validateJob(&spec, func(string) bool { return false }); err != nil {
		return Assignment{}, err
	}
	if len(spec.After) > 0 || len(spec.Keys) > 0 || spec.Group != "" || spec.Mode != ModeNone {
		return Assignment{}, fmt.Errorf("%w: interactive job %q takes no dependencies, keys, group or mode", ErrInvalidJob, spec.ID)
	}
	q := s.queues[spec.Queue]
	if q.spec.Paused {
		return Assignment{}, fmt.Errorf("interactive job %q: queue %q is paused: %w", spec.ID, spec.Queue, ErrDenied)
	}
	w := s.freePushWorker(q)
	if w == nil {
		s.stats.Denials++
		if v := s.randomDefault(1); v != nil {
			s.downgrade(v, int(s.run(v).tier)-1)
		}
		return Assignment{}, fmt.Errorf("interactive job %q: %w", spec.ID, ErrDenied)
	}
	j := s.newJob(&spec)
	j.flags |= flagInteractive
	var a Assignment
	s.start(j, j.bucket, w, &a)
	return a, nil
}

func (s *Scheduler) freePushWorker(q *queue) *worker {
	for _, p := range s.poolList {
		if len(p.free) > 0 && p.serves(q) {
			return p.free[0]
		}
	}
	return nil
}
