package sched

import (
	"fmt"
	"slices"
)

// Checks of the jobs an operation started, from the outside. exact says
// that the operation downgraded nothing: the tier counts the model holds
// then are the ones the core saw at each start, so the checks that depend
// on them (queue order among admissible jobs, priorities, the tier of a
// default task, no idle worker left with work) apply too.

func (r *simRun) checkStarts(starts []Assignment, how simHow, exact bool) error {
	if how.kind == simPull {
		if err := r.m.checkPullShape(starts, how); err != nil {
			return err
		}
	}
	for i, a := range starts {
		first := how.kind != simPull || i == 0
		if err := r.m.checkStart(a, how, exact, first); err != nil {
			return fmt.Errorf("start of %s on %s: %w", a.JobID, a.WorkerID, err)
		}
	}
	if !exact {
		return nil
	}
	switch how.kind {
	case simDispatch:
		return r.m.checkNoIdlePushWorker()
	case simPull:
		return r.m.checkPullTookAll(starts, how)
	}
	return nil
}

// checkPullShape: a pull hands the worker that asked at most what it asked
// for and has room for, all from one queue, at most that queue's batch.
func (m *simModel) checkPullShape(starts []Assignment, how simHow) error {
	if limit := max(0, min(how.max, how.free)); len(starts) > limit {
		return fmt.Errorf("pull of %d by %s with %d free slots got %d jobs", how.max, how.worker.spec.ID, how.free, len(starts))
	}
	for _, a := range starts {
		if a.WorkerID != how.worker.spec.ID || a.Queue != starts[0].Queue {
			return fmt.Errorf("pull by %s got %s of queue %s for %s; want one queue, the puller", how.worker.spec.ID, a.JobID, a.Queue, a.WorkerID)
		}
	}
	if len(starts) > 0 {
		if b := m.queues[starts[0].Queue].Batch; b > 0 && len(starts) > b {
			return fmt.Errorf("pull got %d jobs from queue %s of batch %d", len(starts), starts[0].Queue, b)
		}
	}
	return nil
}

// checkStart judges one assignment, then records the start.
func (m *simModel) checkStart(a Assignment, how simHow, exact, first bool) error {
	j := m.jobs[a.JobID]
	if j == nil {
		return fmt.Errorf("the test never submitted it")
	}
	if j.state != simQueued {
		return fmt.Errorf("it is %s, not queued", j.state)
	}
	w := m.workers[a.WorkerID]
	if err := m.checkPlace(a, j, w, how); err != nil {
		return err
	}
	if err := m.checkDeps(j); err != nil {
		return err
	}
	if err := m.checkTier(a, j, exact); err != nil {
		return err
	}
	if err := m.gateBlock(j); err != nil {
		return err
	}
	if err := m.checkOrder(j, exact); err != nil {
		return err
	}
	if exact && first {
		if err := m.checkPriority(j, w); err != nil {
			return err
		}
	}
	m.start(j, w, a.Tier)
	return nil
}

// checkPlace: the job runs on a known worker with a free slot that serves
// its queue (a push worker for Dispatch), from an active queue, as the
// next attempt.
func (m *simModel) checkPlace(a Assignment, j *simJob, w *simWorker, how simHow) error {
	q := m.queues[j.spec.Queue]
	switch {
	case w == nil:
		return fmt.Errorf("unknown worker")
	case how.kind == simDispatch && !w.spec.Push:
		return fmt.Errorf("Dispatch pushed to pull worker %s", w.spec.ID)
	case w.free() <= 0:
		return fmt.Errorf("worker %s has %d running on %d slots", w.spec.ID, w.running, w.spec.Slots)
	case a.Queue != j.spec.Queue:
		return fmt.Errorf("assignment names queue %s, job is in %s", a.Queue, j.spec.Queue)
	case q.Paused:
		return fmt.Errorf("queue %s is paused", q.Name)
	case !simServes(w, q):
		return fmt.Errorf("worker caps %v miss queue %s's %v", w.spec.Capabilities, q.Name, q.Requires)
	case a.Attempt != j.attempt+1 || a.Interactive:
		return fmt.Errorf("attempt %d interactive %v after %d attempts", a.Attempt, a.Interactive, j.attempt)
	}
	return nil
}

// checkDeps (docs/design.md, "Workflows"): every upstream job succeeded; a job
// that runs after failures needs them finished only.
func (m *simModel) checkDeps(j *simJob) error {
	for _, d := range j.deps {
		up := m.jobs[d]
		if j.spec.RunAfterFailure && up.state.live() || !j.spec.RunAfterFailure && up.state != simSucceeded {
			return fmt.Errorf("dependency %s is %s (run after failure: %v)", d, up.state, j.spec.RunAfterFailure)
		}
	}
	return nil
}

// checkTier: a fixed job runs in its tier; a default task in the largest
// tier the limits allow.
func (m *simModel) checkTier(a Assignment, j *simJob, exact bool) error {
	if a.Tier < 0 || a.Tier >= len(m.tiers) || a.Duration != m.tiers[a.Tier].Duration || a.Default != j.spec.Default {
		return fmt.Errorf("tier %d duration %s default %v", a.Tier, a.Duration, a.Default)
	}
	if !j.spec.Default && a.Tier != j.spec.Tier {
		return fmt.Errorf("runs in tier %d, submitted for tier %d", a.Tier, j.spec.Tier)
	}
	if want := m.largestTier(); j.spec.Default && exact && a.Tier != want {
		return fmt.Errorf("default task starts in tier %d; the limits allow tier %d", a.Tier, want)
	}
	return nil
}

// largestTier is the slowest tier with room in every limit from 1 up to
// it (tier 0's limit, every slot, holds worker by worker).
func (m *simModel) largestTier() int {
	limits := m.tierLimits()
	best := 0
	for t := 1; t < len(limits); t++ {
		if m.counted(t) >= limits[t] {
			break
		}
		best = t
	}
	return best
}

// checkOrder: in a strict queue only the head starts
// (docs/design.md, "Exclusive read/write groups and strict order"); in a FIFO
// queue the first admissible job does; in a random queue no admissible job
// of a higher priority waits
// (docs/design.md, "Per-key limits, priorities and random picks").
func (m *simModel) checkOrder(j *simJob, exact bool) error {
	q := m.queues[j.spec.Queue]
	queued := m.settledQueued(q.Name, j)
	switch {
	case q.Order == OrderStrict:
		if !slices.Contains(simFirsts(queued), j) {
			return fmt.Errorf("strict queue %s: %s overtakes %s", q.Name, j.spec.ID, simIDs(m.ahead(j, queued, nil)))
		}
	case q.Order == OrderFIFO && exact:
		limits := m.tierLimits()
		if ahead := m.ahead(j, queued, limits); len(ahead) > 0 {
			return fmt.Errorf("fifo queue %s: %s overtakes admissible %s", q.Name, j.spec.ID, simIDs(ahead))
		}
	case q.Order == OrderRandom && exact:
		limits := m.tierLimits()
		for _, o := range queued {
			if o.spec.Priority > j.spec.Priority && m.admissible(o, limits) {
				return fmt.Errorf("random queue %s: %s (priority %d) starts while admissible %s has priority %d",
					q.Name, j.spec.ID, j.spec.Priority, o.spec.ID, o.spec.Priority)
			}
		}
	}
	return nil
}

// ahead lists the queued jobs that must start before j (only admissible
// ones when limits are given).
func (m *simModel) ahead(j *simJob, queued []*simJob, limits []int) []*simJob {
	var out []*simJob
	strict := m.queues[j.spec.Queue].Order == OrderStrict
	for _, o := range queued {
		if o.before(j, strict) && (limits == nil || m.admissible(o, limits)) {
			out = append(out, o)
		}
	}
	return out
}

// checkPriority
// (docs/design.md, "Per-key limits, priorities and random picks"): a worker
// gets work from the highest-priority queue it serves that has work.
func (m *simModel) checkPriority(j *simJob, w *simWorker) error {
	prio := m.queues[j.spec.Queue].Priority
	limits := m.tierLimits()
	for _, name := range m.sortedQueues() {
		if q := m.queues[name]; q.Priority > prio && simServes(w, q) && m.hasWork(name, limits) {
			return fmt.Errorf("queue %s (priority %d) has work for %s, but %s (priority %d) was served", name, q.Priority, w.spec.ID, j.spec.Queue, prio)
		}
	}
	return nil
}

// checkNoIdlePushWorker: when Dispatch returns, no push worker with a free
// slot serves a queue that has work.
func (m *simModel) checkNoIdlePushWorker() error {
	limits := m.tierLimits()
	for _, w := range m.sortedWorkers() {
		if !w.spec.Push || w.free() <= 0 {
			continue
		}
		for _, name := range m.sortedQueues() {
			if simServes(w, m.queues[name]) && m.hasWork(name, limits) {
				return fmt.Errorf("after Dispatch, %s has %d free slots and queue %s has work: %s",
					w.spec.ID, w.free(), name, simIDs(m.queued(name)))
			}
		}
	}
	return nil
}

// checkPullTookAll: a pull that got fewer jobs than it could take found no
// more work (in the queue it took from, or in any queue if it got none).
func (m *simModel) checkPullTookAll(starts []Assignment, how simHow) error {
	if len(starts) >= min(how.max, how.free) {
		return nil
	}
	limits := m.tierLimits()
	if len(starts) > 0 {
		q := m.queues[starts[0].Queue]
		if (q.Batch == 0 || len(starts) < q.Batch) && m.hasWork(q.Name, limits) {
			return fmt.Errorf("pull took %d of %d jobs, but queue %s has more work", len(starts), how.max, q.Name)
		}
		return nil
	}
	for _, name := range m.sortedQueues() {
		if simServes(how.worker, m.queues[name]) && m.hasWork(name, limits) {
			return fmt.Errorf("pull got nothing, but queue %s has work: %s", name, simIDs(m.queued(name)))
		}
	}
	return nil
}

func simIDs(js []*simJob) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.spec.ID
	}
	return out
}
