package sched

import (
	"fmt"
	"time"
)

// cycle is one turn of the queue cycle
// (docs/design.md, "Duration tiers and preemption") for the workers of pool p
// (or for the single agent pull when it asks): queues in priority order, ties
// at random; in each, the tier steps; then, if no worker of the pool is free,
// every default task goes to tier 0 and a random interactive task is halted to
// free its slot. It returns the job to start and its worker, or nil when the
// cycle is over and the scheduler waits for a running job to finish. Tiers
// ignored in one queue stay ignored for the rest of the cycle.
func (s *Scheduler) cycle(p *pool, pull *worker, only *queue) (*job, *bucket, *worker) {
	below := len(s.tiers)
	if only != nil {
		if only.spec.Paused {
			return nil, nil, nil
		}
		j, b, w, _ := s.visit(p, pull, only, &below)
		return j, b, w
	}
	// Ties are broken by drawing the queues of a run of equal priorities
	// one by one, a Fisher-Yates shuffle done as far as the cycle goes, so
	// that a cycle that stops in the first run draws nothing for the
	// others. (A draw d among r queues takes the (r-1-d)th remaining, so
	// that two tied queues come in the order rand.Shuffle gave them.)
	for r, start := range s.ties {
		end := int32(len(s.active))
		if r+1 < len(s.ties) {
			end = s.ties[r+1]
		}
		switch end - start {
		case 1:
			if j, b, w, done := s.visit(p, pull, s.active[start], &below); done {
				return j, b, w
			}
			continue
		case 2: // the draw below, unrolled
			d := int32(s.rng.IntN(2))
			if j, b, w, done := s.visit(p, pull, s.active[start+1-d], &below); done {
				return j, b, w
			}
			if j, b, w, done := s.visit(p, pull, s.active[start+d], &below); done {
				return j, b, w
			}
			continue
		}
		order := s.order[:0]
		for i := start; i < end; i++ {
			order = append(order, i)
		}
		s.order = order
		for k := range order {
			if rest := len(order) - k; rest > 1 {
				i := k + rest - 1 - s.rng.IntN(rest)
				order[k], order[i] = order[i], order[k]
			}
			if j, b, w, done := s.visit(p, pull, s.active[order[k]], &below); done {
				return j, b, w
			}
		}
	}
	return nil, nil, nil
}

// visit runs the cycle's steps for queue q: done says the cycle is over,
// with the job to start, its bucket and its worker, or none.
func (s *Scheduler) visit(p *pool, pull *worker, q *queue, below *int) (*job, *bucket, *worker, bool) {
	if !p.serves(q) {
		return nil, nil, nil, false
	}
	h, hb := s.head(q, *below)
	h, hb = s.tierSteps(q, below, h, hb)
	if h == nil {
		return nil, nil, nil, false
	}
	if pull != nil {
		return h, hb, pull, true
	}
	if len(p.free) == 0 {
		s.downgradeAll()
		s.haltForQueue(p)
	}
	if len(p.free) == 0 {
		return nil, nil, nil, true
	}
	return h, hb, p.free[0], true
}

// Dispatch runs the queue cycle until it is over and returns the jobs it
// pushed to free push workers. Call it after anything that may let a job
// start: a submission, a completion, a new worker, a Tick. Downgrades and
// halts it decides are reported by Events.
func (s *Scheduler) Dispatch() []Assignment {
	var out []Assignment
	s.expireDue()
	s.openDueNow()
	for _, p := range s.poolList {
		if p.pushers == 0 {
			continue
		}
		for {
			j, b, w := s.cycle(p, nil, nil)
			if j == nil {
				break
			}
			s.dequeueFrom(j, b)
			out = append(out, Assignment{})
			s.start(j, b, w, &out[len(out)-1])
			s.prefetchHead(b.queue)
		}
	}
	return out
}

// Pull hands up to max jobs to the worker that asks, all from the
// highest-priority queue it serves that has ready work (at most that queue's
// Batch), never more than its free slots. Asking renews its lease.
func (s *Scheduler) Pull(workerID string, max int) ([]Assignment, error) {
	return s.PullAppend(nil, workerID, max)
}

// PullAppend is Pull appending to dst, so that a driver that reuses its
// buffer allocates nothing per request. On error it returns dst unchanged.
func (s *Scheduler) PullAppend(dst []Assignment, workerID string, max int) ([]Assignment, error) {
	w, err := s.worker(workerID)
	if err != nil {
		return dst, err
	}
	if max < 0 {
		return dst, fmt.Errorf("%w: %d is negative", ErrInvalidBatch, max)
	}
	s.renew(w)
	s.expireDue()
	s.openDueNow()
	n := min(max, w.free())
	var from *queue
	for got := 0; got < n; got++ {
		j, b, _ := s.cycle(w.pool, w, from)
		if j == nil {
			break
		}
		from = b.queue
		s.dequeueFrom(j, b)
		dst = append(dst, Assignment{})
		s.start(j, b, w, &dst[len(dst)-1])
		if b := from.spec.Batch; b > 0 && got+1 >= b {
			break
		}
	}
	if from != nil {
		s.prefetchHead(from)
	}
	return dst, nil
}

// start runs a job of bucket b (already out of its queue) on worker w and
// fills in its assignment a (in place, as the caller's result holds it). A
// default task gets the slowest tier the limits allow.
func (s *Scheduler) start(j *job, b *bucket, w *worker, a *Assignment) {
	tier := int(j.tier)
	if j.isDefault() {
		tier = s.largestTier()
	}
	s.startSeq++
	now := s.nowNS()
	j.pos = s.newRun(runInfo{worker: w, started: now, startSeq: s.startSeq, job: j.slot,
		tier: int8(tier), wpos: int32(len(w.jobs))})
	j.state = stateRunning
	j.attempt++
	s.dropDeadline(j)
	s.running[tier]++
	if j.isDefault() {
		s.addToSet(&s.defaults[tier], j)
	} else if j.isInteractive() {
		s.addToSet(&s.interactive, j)
	}
	s.runHints.add(j, len(s.runs)-len(s.runFree))
	s.setLimit(j)
	s.hold(b, now)
	w.jobs = append(w.jobs, j)
	if w.free() <= 0 {
		w.pool.dropFree(w)
	}
	q := b.queue
	q.running++
	if q.spec.StrictStart && q.strictOrder() {
		s.runs[j.pos].unconfirmed = true
		q.unconfirmed++
	}
	s.stats.Started++
	*a = Assignment{JobID: j.id, Queue: q.spec.Name, WorkerID: w.id, Attempt: int(j.attempt),
		Tier: tier, Duration: s.tiers[tier].Duration, Default: j.isDefault(), Interactive: j.isInteractive()}
	if a.Interactive {
		a.Duration = 0
	}
}

// run returns the running attempt of a running job. The pointer is valid
// until the next start.
func (s *Scheduler) run(j *job) *runInfo { return &s.runs[j.pos] }

// release ends a job's running attempt: its tier slot, gates and worker slot
// are free again.
func (s *Scheduler) release(j *job) {
	r := s.run(j)
	s.running[r.tier]--
	if j.isDefault() {
		s.removeFromSet(&s.defaults[r.tier], j)
	} else if j.isInteractive() {
		s.removeFromSet(&s.interactive, j)
	}
	s.unhold(j.bucket)
	w := r.worker
	last := len(w.jobs) - 1
	if int(r.wpos) != last {
		w.jobs[r.wpos] = w.jobs[last]
		s.run(w.jobs[r.wpos]).wpos = r.wpos
	}
	w.jobs[last] = nil
	w.jobs = w.jobs[:last]
	w.pool.addFree(w)
	j.queue().running--
	if r.unconfirmed {
		j.queue().unconfirmed--
	}
	*r = runInfo{}
	s.runFree = append(s.runFree, j.pos)
	j.pos = -1
}

// newRun stores a running attempt and returns its index in s.runs.
func (s *Scheduler) newRun(r runInfo) int32 {
	if n := len(s.runFree); n > 0 {
		i := s.runFree[n-1]
		s.runFree = s.runFree[:n-1]
		s.runs[i] = r
		return i
	}
	s.runs = append(s.runs, r)
	return int32(len(s.runs) - 1)
}

// running returns the running job whose id is id, or nil. A driver that
// passes back the JobID of its Assignment is answered from the running
// jobs alone (runHints); any other string goes through the id index.
func (s *Scheduler) runningJob(id string) *job {
	if j := s.runHints.get(&s.jobs, id); j != nil {
		return j
	}
	if j := s.jobs.get(id); j != nil && j.state == stateRunning {
		return j
	}
	return nil
}

// Complete reports the end of a job's attempt. A repeated report, a report
// for an unknown job or for an attempt that is no longer current is
// acknowledged and ignored. A failed attempt is retried by the job's policy.
func (s *Scheduler) Complete(id string, attempt int, outcome Outcome) Ack {
	j := s.runningJob(id)
	if j == nil || int(j.attempt) != attempt {
		return Ack{Ignored: true}
	}
	if !j.isInteractive() {
		s.learned.observe(j, time.Duration(s.nowNS()-s.run(j).started))
	}
	s.release(j)
	if outcome == Succeeded {
		s.stats.Succeeded++
		s.forget(j, true)
		return Ack{}
	}
	if j.isInteractive() || outcome == FailedFinal {
		s.stats.Failed++
		s.forget(j, false)
		return Ack{}
	}
	again, at := s.retryOrFail(j)
	return Ack{Retrying: again, RetryAt: at}
}

// Release hands back a running attempt that never reached its worker (the
// agent went away before the answer that carried it): the job is queued
// again, behind the jobs already ready, and the attempt does not count.
// It returns false, changing nothing, unless the attempt is the job's
// running one. Interactive tasks are not released.
func (s *Scheduler) Release(id string, attempt int) bool {
	j := s.runningJob(id)
	if j == nil || int(j.attempt) != attempt || j.isInteractive() {
		return false
	}
	s.release(j)
	s.stats.Started--
	j.attempt--
	s.makeReady(j)
	return true
}

// Cancel withdraws a job in any state. A running job's slot is freed at once
// and EventStopped tells the driver to stop it. Its dependants are cancelled
// (EventCancelled) unless they run after failures.
func (s *Scheduler) Cancel(id string) error {
	j := s.jobs.get(id)
	if j == nil {
		return fmt.Errorf("job %q: %w", id, ErrUnknownJob)
	}
	s.cancel(j, false)
	return nil
}

// cancel withdraws j; announce says whether the driver must be told with
// EventCancelled (it did not ask for this cancellation itself).
func (s *Scheduler) cancel(j *job, announce bool) {
	q := j.queue()
	switch j.state {
	case stateQueued:
		s.dequeue(j)
	case stateWaiting:
		q.waiting--
	case stateDelayed:
		s.delayed.remove(&s.jobs, int(j.pos))
		q.delayed--
	case stateRunning:
		w, attempt := s.run(j).worker, int(j.attempt)
		s.release(j)
		s.emit(Event{Kind: EventStopped, JobID: j.id, WorkerID: w.id, Attempt: attempt})
	}
	s.stats.Cancelled++
	if announce {
		s.emit(Event{Kind: EventCancelled, JobID: j.id})
	}
	s.forget(j, false)
}
