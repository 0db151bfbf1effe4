package sched

// The core prefetches what the next pick from a queue will read (see
// prefetchHead); package prefetch issues the hints.

import (
	"github.com/usherhq/usher/internal/sched/internal/prefetch"
	"github.com/usherhq/usher/internal/sched/internal/wintree"
)

// drawsAhead is how many picks ahead a random queue draws: one for each
// step of prefetchRandomPicks.
const drawsAhead = 3

// prefetchHead starts fetching the records the next pick from queue q will
// read, so that a queue served a million jobs ago does not stall the next
// pull on memory: one op of lead lets those reads overlap the rest of the
// op. For a FIFO queue that is its head and the head's bucket. A random
// pick reads a chain: its bucket's entry in the ready index, a slot of the
// bucket's set, the job in that slot, the job a removal from the set moves,
// and the bucket and its gate. Each link needs the one before in cache, so
// each call fetches one link for each of the next drawsAhead picks: the
// entry of the third, the slots and bucket of the second, the jobs and gate
// of the next. A submission or another pick in between may change a pick;
// the prefetch is then wasted, never wrong.
func (s *Scheduler) prefetchHead(q *queue) {
	switch q.spec.Order {
	case OrderFIFO:
		s.prefetchFIFOHead(q)
	case OrderRandom:
		s.prefetchRandomPicks(q)
	}
}

// prefetchFIFOHead fetches the first job of a FIFO queue and its bucket.
func (s *Scheduler) prefetchFIFOHead(q *queue) {
	if best := q.firstInOrder(len(q.tree)); best.Key != wintree.NoKey {
		prefetch.Record(s.jobs.At(best.First))
		prefetch.Record(s.bkts.At(best.Num))
	}
}

// prefetchRandomPicks fetches one link of each of the next three picks of
// a random queue, the farthest first; d[0], d[1] are the next pick's draws.
func (s *Scheduler) prefetchRandomPicks(q *queue) {
	prio, total, ok := q.topLevels(len(q.rand))
	if !ok {
		return
	}
	d := &q.draws
	if r, ok := boundedBy(d[4], total); ok {
		prefetch.Record(q.randomEntry(len(q.rand), prio, r))
	}
	if e, i := q.drawnSlot(prio, total, d[2], d[3]); e != nil {
		prefetch.Record(&e.jobs[i])
		prefetch.Record(&e.jobs[len(e.jobs)-1])
		prefetch.Record(s.bkts.At(e.b))
	}
	if e, i := q.drawnSlot(prio, total, d[0], d[1]); e != nil {
		prefetch.Record(s.jobs.At(e.jobs[i]))
		prefetch.Record(s.jobs.At(e.jobs[len(e.jobs)-1]))
		if b := s.bkts.At(e.b); b.gate0 != 0 {
			prefetch.Record(s.gcs.At(b.gate0 - 1))
		}
	}
}

// drawnSlot returns the set entry and the index in its set that the draws
// d0 and d1 pick among total visible buckets of priority prio, or nil for
// draws that boundedBy rejects.
func (q *queue) drawnSlot(prio int16, total int, d0, d1 uint64) (*setEntry, int) {
	r, ok := boundedBy(d0, total)
	if !ok {
		return nil, 0
	}
	e := q.randomEntry(len(q.rand), prio, r)
	i, ok := boundedBy(d1, len(e.jobs))
	if !ok {
		return nil, 0
	}
	return e, i
}
