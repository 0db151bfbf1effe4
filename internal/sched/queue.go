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
	ready   []bucketHeap
	strict  jobHeap
	buckets map[string]*bucket // by signature (see signature)

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
		q = &queue{spec: spec, buckets: map[string]*bucket{}}
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
	for _, b := range q.buckets {
		if b.idle {
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
}

// queueOrder lists active queues by priority, shuffling each run of equal
// priorities so that ties are broken at random.
func (s *Scheduler) queueOrder() []*queue {
	out := s.scratch[:0]
	for _, q := range s.byPrio {
		if !q.spec.Paused {
			out = append(out, q)
		}
	}
	for i := 0; i < len(out); {
		k := i + 1
		for k < len(out) && out[k].spec.Priority == out[i].spec.Priority {
			k++
		}
		if k-i > 1 {
			run := out[i:k]
			s.rng.Shuffle(len(run), func(a, b int) { run[a], run[b] = run[b], run[a] })
		}
		i = k
	}
	s.scratch = out
	return out
}

func (q *queue) resetReady(tiers int) {
	q.ready = make([]bucketHeap, tiers)
	for t := range q.ready {
		q.ready[t] = bucketHeap{tier: t, ordered: q.spec.Order == OrderFIFO}
	}
	q.strict = nil
}

// refile moves a queue's ready jobs into the structures of its new order.
func (s *Scheduler) refile(q *queue) {
	var ready []*job
	for _, j := range s.jobs.all() {
		if j.queue() == q && j.state == stateQueued {
			ready = append(ready, j)
		}
	}
	slices.SortFunc(ready, func(a, b *job) int { return cmp.Compare(a.key, b.key) })
	for _, j := range ready {
		j.key = sortKey(q.orderPrio(j), j.key&seqMask)
	}
	q.resetReady(len(s.tiers))
	q.queued -= len(ready)
	// Buckets of a strict queue carry no per-tier heaps and vice versa.
	for _, b := range q.buckets {
		b.queued = 0
		b.resetTiers(len(s.tiers), q.strictOrder())
	}
	for _, j := range ready {
		s.enqueue(j)
	}
}

// enqueue files a ready job in its queue.
func (s *Scheduler) enqueue(j *job) {
	q := j.queue()
	j.state = stateQueued
	q.queued++
	j.bucket.queued++
	if q.strictOrder() {
		q.strict.push(&s.jobs, j.key, j)
		return
	}
	b, t := j.bucket, int(j.tier)
	bt := &b.tiers[t]
	if q.spec.Order == OrderRandom {
		bt.set.add(j)
		if b.closed == 0 && bt.pos < 0 {
			q.ready[t].push(0, b, 0)
		}
		return
	}
	bt.jobs.push(&s.jobs, j.key, j)
	if b.closed > 0 {
		return
	}
	if bt.pos < 0 {
		q.ready[t].push(j.key, b, j.slot)
	} else if j.pos == 0 {
		q.ready[t].rekey(int(bt.pos), j.key, j.slot)
	}
}

// dequeue takes a queued job out of its queue.
func (s *Scheduler) dequeue(j *job) {
	q := j.queue()
	q.queued--
	j.bucket.queued--
	if q.strictOrder() {
		q.strict.remove(&s.jobs, int(j.pos))
		return
	}
	b, t := j.bucket, int(j.tier)
	bt := &b.tiers[t]
	if q.spec.Order == OrderRandom {
		bt.set.swapRemove(&s.jobs, int(j.pos))
		if bt.pos >= 0 && len(bt.set) == 0 {
			q.ready[t].remove(int(bt.pos))
		}
		return
	}
	wasFirst := j.pos == 0
	bt.jobs.remove(&s.jobs, int(j.pos))
	if bt.pos < 0 {
		return
	}
	if len(bt.jobs) == 0 {
		q.ready[t].remove(int(bt.pos))
	} else if wasFirst {
		first := bt.jobs[0]
		q.ready[t].rekey(int(bt.pos), first.key, first.slot)
	}
}

// hide takes a bucket whose gate closed out of the ready index.
func (q *queue) hide(b *bucket) {
	for t := range b.tiers {
		if pos := b.tiers[t].pos; pos >= 0 {
			q.ready[t].remove(int(pos))
		}
	}
}

// show puts a bucket whose gates all opened back into the ready index.
func (q *queue) show(b *bucket) {
	for t := range b.tiers {
		bt := &b.tiers[t]
		if h := bt.jobs; len(h) > 0 {
			q.ready[t].push(h[0].key, b, h[0].slot)
		} else if len(bt.set) > 0 {
			q.ready[t].push(0, b, 0)
		}
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
		set := q.ready[t].items[r].b.tiers[t].set
		return s.jobs.at(set[s.rng.IntN(len(set))])
	}
	return nil
}
