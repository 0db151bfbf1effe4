package sched

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"

	"github.com/usherhq/usher/internal/sched/internal/wintree"
)

// queue holds a queue's ready jobs. FIFO and random queues keep, per tier, the
// buckets whose gates are open: in a tournament tree by each bucket's first
// job (FIFO), or as a set per job priority (random, see randlevels.go); a
// strict queue keeps one heap of all its ready jobs, since only its head may
// start.
type queue struct {
	spec    QueueSpec
	num     uint32         // tells queues apart in bucket identities
	tree    []wintree.Tree // FIFO: per tier
	rand    []randTier     // random: per tier
	strict  jobHeap
	buckets []*bucket              // every bucket of the queue, idle ones included
	draws   [2 * drawsAhead]uint64 // random: the next picks' draws (see randomHead)

	queued, waiting, delayed, running int
	unconfirmed                       int // running attempts not yet confirmed started (see startGated)
}

func (q *queue) strictOrder() bool { return q.spec.Order == OrderStrict }

// orderPrio is the priority that orders j in q: a strict queue starts jobs in
// request order
// (docs/design.md, "Exclusive read/write groups and strict order"), so it
// ignores job priorities.
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
		for i := range q.draws {
			q.draws[i] = s.rng.Uint64()
		}
		q.resetReady(len(s.tiers))
		s.queues[spec.Name] = q
		s.queueNames.Clear()
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
	s.queueNames.Clear()
	s.sortQueues()
	return nil
}

// queue returns the queue with this name, or nil.
func (s *Scheduler) queue(name string) *queue {
	if q := s.queueNames.Get(name); q != nil {
		return q
	}
	q := s.queues[name]
	if q != nil {
		s.queueNames.Put(name, q)
	}
	return q
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

func (q *queue) resetReady(tiers int) {
	q.tree, q.rand, q.strict = nil, nil, nil
	switch q.spec.Order {
	case OrderFIFO:
		q.tree = make([]wintree.Tree, tiers)
	case OrderRandom:
		q.rand = make([]randTier, tiers)
	}
}

// refile moves a queue's jobs into the structures of its new order: ready
// jobs are filed again in their order, and jobs in any state move to the
// buckets of the new order (FIFO and random buckets split by priority).
func (s *Scheduler) refile(q *queue) {
	for _, b := range q.buckets {
		b.lvl = nil // the old order's levels go with its ready index
	}
	q.resetReady(len(s.tiers))
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
	for _, b := range q.buckets {
		b.queued, b.pos, b.head, b.tail, b.set = 0, -1, noSlot, noSlot, nil
		if q.spec.Order == OrderRandom && b.lvl == nil {
			b.lvl = q.levelFor(b.tier, b.prio)
		}
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
		s.jobSet(b).add(j)
		if b.closed == 0 && b.pos < 0 {
			q.rand[b.tier].add(b)
		}
		return
	}
	s.listPush(b, j)
	if b.closed == 0 && b.pos < 0 {
		b.pos = q.tree[b.tier].Add(b.num, b.headKey, b.head)
	}
}

// dequeue takes a queued job out of its queue.
func (s *Scheduler) dequeue(j *job) { s.dequeueFrom(j, j.bucket) }

// dequeueFrom is dequeue for a job of bucket b.
func (s *Scheduler) dequeueFrom(j *job, b *bucket) {
	q := b.queue
	q.queued--
	b.queued--
	switch q.spec.Order {
	case OrderStrict:
		q.strict.remove(&s.jobs, int(j.pos))
		return
	case OrderRandom:
		s.jobSet(b).swapRemove(&s.jobs, j)
		if b.pos >= 0 && b.queued == 0 {
			q.rand[b.tier].remove(&s.bkts, b)
		}
		return
	}
	wasFirst := b.head == j.slot
	s.listRemove(b, j)
	if b.pos < 0 {
		return
	}
	if b.queued == 0 {
		q.tree[b.tier].Remove(b.pos)
		b.pos = -1
	} else if wasFirst {
		q.tree[b.tier].Update(b.pos, b.headKey, b.head)
	}
}

// jobSet returns the set of queued jobs of a bucket of a random queue: in
// its ready index entry while it is visible, else in its record.
func (s *Scheduler) jobSet(b *bucket) *slotSet {
	if b.pos >= 0 {
		return &b.lvl.set[b.pos].jobs
	}
	return &b.set
}

// hide takes a bucket whose gate closed out of the ready index.
func (s *Scheduler) hide(b *bucket) {
	if b.pos < 0 {
		return
	}
	if q := b.queue; q.spec.Order == OrderFIFO {
		q.tree[b.tier].Remove(b.pos)
		b.pos = -1
	} else {
		q.rand[b.tier].remove(&s.bkts, b)
	}
}

// show puts a bucket whose gates all opened back into the ready index.
func (s *Scheduler) show(b *bucket) {
	if !b.visible() {
		return
	}
	if q := b.queue; q.spec.Order == OrderFIFO {
		b.pos = q.tree[b.tier].Add(b.num, b.headKey, b.head)
	} else {
		q.rand[b.tier].add(b)
	}
}

// head returns the queue's next admissible job among tiers below limit and
// its bucket, or nil: for FIFO the first in order, for random a random one,
// for strict the head itself if nothing blocks it. A head whose bucket
// holds a key with no token left is parked until the token is due, and the
// queue looks again (docs/design.md, "Per-key rate limits"). FIFO and
// random queues take the bucket from their ready index, not from the job's
// record, so that the two (with a million jobs queued, both likely out of
// cache) are fetched in parallel rather than one after the other.
func (s *Scheduler) head(q *queue, below int) (*job, *bucket) {
	for {
		var j *job
		var b *bucket
		switch q.spec.Order {
		case OrderStrict:
			j, b = s.strictHead(q, below)
		case OrderRandom:
			j, b = s.randomHead(q, below)
		default:
			best := q.firstInOrder(below)
			if best.Key == wintree.NoKey {
				return nil, nil
			}
			j, b = s.jobs.At(best.First), s.bkts.At(best.Num)
		}
		if j == nil || b.flags&ratedGates == 0 {
			return j, b
		}
		g := s.dryGate(b)
		if g == nil {
			return j, b
		}
		s.park(b, g)
	}
}

// strictHead returns a strict queue's head and its bucket if nothing
// blocks it, else nil.
func (s *Scheduler) strictHead(q *queue, below int) (*job, *bucket) {
	if len(q.strict) == 0 || q.startGated() {
		return nil, nil
	}
	j := s.jobs.At(q.strict.top())
	if b := j.bucket; b.closed == 0 && int(b.tier) < below {
		return j, b
	}
	return nil, nil
}

// firstInOrder returns the ready-index entry of a FIFO queue's first visible
// bucket among tiers below limit; its key is wintree.NoKey when there is none.
func (q *queue) firstInOrder(below int) wintree.Entry {
	best := wintree.Entry{Key: wintree.NoKey}
	for t := 0; t < below; t++ {
		if e, ok := q.tree[t].Top(); ok && e.Key < best.Key {
			best = e
		}
	}
	return best
}

// randomHead picks, among the tiers below limit, the highest job priority
// with a visible bucket, a random visible bucket of that priority, then a
// random job in it: two draws
// (docs/design.md, "Per-key limits, priorities and random picks"). Its two
// draws were made drawsAhead picks earlier, so that prefetchHead can fetch what
// they name ahead of this pick. Nothing decides anything on them before the
// pick, so the pick is as uniform over the buckets and jobs it finds as one
// drawn now.
func (s *Scheduler) randomHead(q *queue, below int) (*job, *bucket) {
	prio, total, ok := q.topLevels(below)
	if !ok {
		return nil, nil
	}
	d := q.draws
	copy(q.draws[:], d[2:])
	q.draws[len(d)-2], q.draws[len(d)-1] = s.rng.Uint64(), s.rng.Uint64()
	e := q.randomEntry(below, prio, s.bounded(d[0], total))
	set := e.jobs
	return s.jobs.At(set[s.bounded(d[1], len(set))]), s.bkts.At(e.b)
}

// bounded maps a uniform 64-bit draw d to a uniform number in [0, n), with
// a fresh draw in the rare case boundedBy rejects d.
func (s *Scheduler) bounded(d uint64, n int) int {
	if i, ok := boundedBy(d, n); ok {
		return i
	}
	return s.rng.IntN(n)
}

// boundedBy maps a uniform 64-bit draw to a uniform number in [0, n) by
// Lemire's multiply-and-reject; ok is false for the few draws it rejects
// (fewer than n in 2^64), which are no more likely for one result than
// another.
func boundedBy(d uint64, n int) (int, bool) {
	hi, lo := bits.Mul64(d, uint64(n))
	if lo < uint64(n) && lo < -uint64(n)%uint64(n) {
		return 0, false
	}
	return int(hi), true
}
