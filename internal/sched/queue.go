package sched

import (
	"cmp"
	"fmt"
	"slices"
)

// queue holds a queue's ready jobs. FIFO and random queues keep, per tier, the
// buckets whose gates are open (ordered by each bucket's first job for
// FIFO); a strict queue keeps one heap of all its ready jobs, since only its
// head may start.
type queue struct {
	spec    QueueSpec
	num     uint32 // tells queues apart in bucket identities
	ready   []bucketHeap
	strict  jobHeap
	buckets []*bucket // every bucket of the queue, idle ones included

	queued, waiting, delayed, running int
}

func (q *queue) strictOrder() bool { return q.spec.Order == OrderStrict }

// orderPrio is the priority that orders j in q: a strict queue starts jobs
// in request order (seed 002), so it ignores job priorities.
func (q *queue) orderPrio(j *job) int16 {
	if q.strictOrder() {
		return 0
	}
	return j.prio
}

// DefineQueue creates a queue or updates an existing one. Changing the order
// of a queue re-files its ready jobs.
func (s *Scheduler) DefineQueue(spec QueueSpec) error {
	if spec.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidQueue)
	}
	if spec.Order > OrderRandom {
		return fmt.Errorf("%w: queue %q: unknown order %d", ErrInvalidQueue, spec.Name, spec.Order)
	}
	if spec.Batch < 0 {
		return fmt.Errorf("queue %q: %w: %d is negative", spec.Name, ErrInvalidBatch, spec.Batch)
	}
	if err := validateRetry(&spec.Retry); err != nil {
		return fmt.Errorf("queue %q: %w", spec.Name, err)
	}
	spec.Requires = dedupe(spec.Requires)
	q, ok := s.queues[spec.Name]
	if !ok {
		s.queueSeq++
		q = &queue{spec: spec, num: s.queueSeq}
		q.resetReady(len(s.tiers))
		s.queues[spec.Name] = q
	} else {
		reorder := q.spec.Order != spec.Order
		q.spec = spec
		if reorder {
			s.refile(q)
		}
	}
	s.sortQueues()
	return nil
}

// RemoveQueue deletes a queue. It is refused while the queue has running
// jobs; its waiting, delayed and queued jobs are cancelled (with their
// dependants, as for any cancellation).
func (s *Scheduler) RemoveQueue(name string) error {
	q, ok := s.queues[name]
	if !ok {
		return fmt.Errorf("queue %q: %w", name, ErrUnknownQueue)
	}
	if q.running > 0 {
		return fmt.Errorf("queue %q: %w (%d)", name, ErrQueueBusy, q.running)
	}
	var victims []string
	for _, j := range s.jobs.all() {
		if j.queue() == q {
			victims = append(victims, j.id)
		}
	}
	slices.Sort(victims)
	for _, id := range victims {
		// A victim may be gone already: cancelled as a dependant of
		// another, its slot perhaps reused.
		if j := s.jobs.get(id); j != nil {
			s.cancel(j, true)
		}
	}
	for _, b := range slices.Clone(q.buckets) {
		if b.refs == 0 {
			s.dropBucket(b)
		}
	}
	delete(s.queues, name)
	s.sortQueues()
	return nil
}

func (s *Scheduler) sortQueues() {
	s.byPrio = s.byPrio[:0]
	for _, q := range s.queues {
		s.byPrio = append(s.byPrio, q)
	}
	slices.SortFunc(s.byPrio, func(a, b *queue) int {
		if c := cmp.Compare(b.spec.Priority, a.spec.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.spec.Name, b.spec.Name)
	})
	s.active, s.ties = s.active[:0], s.ties[:0]
	for _, q := range s.byPrio {
		if q.spec.Paused {
			continue
		}
		if n := len(s.active); n == 0 || s.active[n-1].spec.Priority != q.spec.Priority {
			s.ties = append(s.ties, int32(n))
		}
		s.active = append(s.active, q)
	}
}

// queueOrder lists active queues by priority, shuffling each run of equal
// priorities so that ties are broken at random (rand.Shuffle's draws,
// without its indirect calls).
func (s *Scheduler) queueOrder() []*queue {
	out := append(s.scratch[:0], s.active...)
	for r, start := range s.ties {
		end := len(out)
		if r+1 < len(s.ties) {
			end = int(s.ties[r+1])
		}
		run := out[start:end]
		for i := len(run) - 1; i > 0; i-- {
			j := s.rng.IntN(i + 1)
			run[i], run[j] = run[j], run[i]
		}
	}
	s.scratch = out
	return out
}

func (q *queue) resetReady(tiers int) {
	q.ready = make([]bucketHeap, tiers)
	for t := range q.ready {
		q.ready[t] = bucketHeap{ordered: q.spec.Order == OrderFIFO}
	}
	q.strict = nil
}

// refile moves a queue's jobs into the structures of its new order: ready
// jobs are filed again in their order, and jobs in any state move to the
// buckets of the new order (FIFO buckets split by priority).
func (s *Scheduler) refile(q *queue) {
	var ready []*job
	for _, j := range s.jobs.all() {
		if j.queue() != q {
			continue
		}
		if j.state == stateQueued {
			ready = append(ready, j)
		}
		if want := bucketPrio(q, j.prio); j.bucket.prio != want {
			old := j.bucket
			j.bucket = s.bucketLike(old, want)
			s.refBucket(j.bucket)
			s.releaseBucket(old)
		}
	}
	slices.SortFunc(ready, func(a, b *job) int { return cmp.Compare(a.key, b.key) })
	q.resetReady(len(s.tiers))
	for _, b := range q.buckets {
		b.queued, b.pos, b.head, b.tail, b.set = 0, -1, noSlot, noSlot, nil
	}
	q.queued -= len(ready)
	for _, j := range ready {
		j.key = sortKey(q.orderPrio(j), j.key&seqMask)
		s.enqueue(j)
	}
}

// enqueue files a ready job in its queue.
func (s *Scheduler) enqueue(j *job) {
	b := j.bucket
	q := b.queue
	j.state = stateQueued
	q.queued++
	b.queued++
	switch q.spec.Order {
	case OrderStrict:
		q.strict.push(&s.jobs, j.key, j)
		return
	case OrderRandom:
		b.set.add(j)
		if b.closed == 0 && b.pos < 0 {
			q.ready[b.tier].push(&s.bkts, 0, b, 0)
		}
		return
	}
	s.listPush(b, j)
	if b.closed > 0 {
		return
	}
	if b.pos < 0 {
		q.ready[b.tier].push(&s.bkts, b.headKey, b, b.head)
	} else if b.head == j.slot {
		q.ready[b.tier].rekey(&s.bkts, int(b.pos), j.key, j.slot)
	}
}

// dequeue takes a queued job out of its queue.
func (s *Scheduler) dequeue(j *job) {
	b := j.bucket
	q := b.queue
	q.queued--
	b.queued--
	switch q.spec.Order {
	case OrderStrict:
		q.strict.remove(&s.jobs, int(j.pos))
		return
	case OrderRandom:
		b.set.swapRemove(&s.jobs, int(j.pos))
		if b.pos >= 0 && b.queued == 0 {
			q.ready[b.tier].remove(&s.bkts, int(b.pos))
		}
		return
	}
	wasFirst := b.head == j.slot
	s.listRemove(b, j)
	if b.pos < 0 {
		return
	}
	if b.queued == 0 {
		q.ready[b.tier].remove(&s.bkts, int(b.pos))
	} else if wasFirst {
		q.ready[b.tier].rekey(&s.bkts, int(b.pos), b.headKey, b.head)
	}
}

// hide takes a bucket whose gate closed out of the ready index.
func (s *Scheduler) hide(b *bucket) {
	if b.pos >= 0 {
		b.queue.ready[b.tier].remove(&s.bkts, int(b.pos))
	}
}

// show puts a bucket whose gates all opened back into the ready index.
func (s *Scheduler) show(b *bucket) {
	if b.visible() {
		b.queue.ready[b.tier].push(&s.bkts, b.headKey, b, b.head)
	}
}

// head returns the queue's next admissible job among tiers below limit, or
// nil: for FIFO the first in order, for random a random one, for strict the
// head itself if nothing blocks it.
func (s *Scheduler) head(q *queue, below int) *job {
	switch q.spec.Order {
	case OrderStrict:
		if len(q.strict) == 0 {
			return nil
		}
		j := s.jobs.at(q.strict.top())
		if j.bucket.closed > 0 || int(j.tier) >= below {
			return nil
		}
		return j
	case OrderRandom:
		return s.randomHead(q, below)
	}
	var best *bucketEntry
	for t := 0; t < below; t++ {
		if h := &q.ready[t]; len(h.items) > 0 && (best == nil || h.items[0].key < best.key) {
			best = &h.items[0]
		}
	}
	if best == nil {
		return nil
	}
	return s.jobs.at(best.first)
}

// randomHead picks a random visible bucket of the tiers below limit, then a
// random job in it (seed 004's two randints).
func (s *Scheduler) randomHead(q *queue, below int) *job {
	total := 0
	for t := 0; t < below; t++ {
		total += q.ready[t].len()
	}
	if total == 0 {
		return nil
	}
	r := s.rng.IntN(total)
	for t := 0; t < below; t++ {
		if n := q.ready[t].len(); r >= n {
			r -= n
			continue
		}
		set := s.bkts.at(q.ready[t].items[r].b).set
		return s.jobs.at(set[s.rng.IntN(len(set))])
	}
	return nil
}
