package sched

// A random queue orders by job priority first: a pick takes the highest
// priority that has a visible bucket, then a random bucket of that
// priority, then a random job in it
// (docs/design.md, "Per-key limits, priorities and random picks").
// Buckets of random queues are split by job priority (see bucketPrio), and
// each tier of a random queue keeps a level per priority: the set of that
// priority's visible buckets, and a max-heap of the levels whose set is not
// empty. A pick reads the top of each tier's heap, so its cost stays that
// of the tiers, whatever the number of priorities or buckets; a level
// enters or leaves the heap only when its set fills or empties, in
// O(log levels).

// randLevel holds the visible buckets of one job priority in one tier of a
// random queue.
type randLevel struct {
	set  bucketSet // the visible buckets; a bucket's pos is its index here
	prio int16
	hpos int32 // index in randTier.heap; -1 while set is empty
	refs int32 // buckets of the queue with this tier and priority
}

// randTier is a random queue's ready index for one tier.
type randTier struct {
	levels map[int16]*randLevel // every level some bucket names
	heap   []*randLevel         // the levels with visible buckets, highest priority on top
}

// levelFor returns the level of tier and priority prio, creating it, and
// counts one more bucket naming it.
func (q *queue) levelFor(tier int8, prio int16) *randLevel {
	rt := &q.rand[tier]
	l := rt.levels[prio]
	if l == nil {
		if rt.levels == nil {
			rt.levels = make(map[int16]*randLevel)
		}
		l = &randLevel{prio: prio, hpos: -1}
		rt.levels[prio] = l
	}
	l.refs++
	return l
}

// releaseLevel counts one bucket fewer naming b's level, and forgets the
// level when none does.
func (q *queue) releaseLevel(b *bucket) {
	l := b.lvl
	b.lvl = nil
	if l.refs--; l.refs == 0 {
		delete(q.rand[b.tier].levels, l.prio)
	}
}

// add makes bucket b, of this tier, visible.
func (rt *randTier) add(b *bucket) {
	l := b.lvl
	l.set.add(b)
	if len(l.set) == 1 {
		l.hpos = int32(len(rt.heap))
		rt.heap = append(rt.heap, l)
		rt.up(int(l.hpos))
	}
}

// remove hides bucket b, of this tier.
func (rt *randTier) remove(t *bucketTable, b *bucket) {
	l := b.lvl
	l.set.remove(t, b)
	if len(l.set) == 0 {
		rt.removeLevel(int(l.hpos))
	}
}

// top returns the highest priority level with visible buckets, or nil.
func (rt *randTier) top() *randLevel {
	if len(rt.heap) == 0 {
		return nil
	}
	return rt.heap[0]
}

func (rt *randTier) removeLevel(i int) {
	h := rt.heap
	h[i].hpos = -1
	n := len(h) - 1
	if i != n {
		h[i] = h[n]
		h[i].hpos = int32(i)
	}
	h[n] = nil
	rt.heap = h[:n]
	if i < n {
		rt.down(i)
		rt.up(i)
	}
}

func (rt *randTier) up(i int) {
	h := rt.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].prio >= h[i].prio {
			break
		}
		h[p], h[i] = h[i], h[p]
		h[p].hpos, h[i].hpos = int32(p), int32(i)
		i = p
	}
}

func (rt *randTier) down(i int) {
	h := rt.heap
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].prio > h[c].prio {
			c++
		}
		if h[i].prio >= h[c].prio {
			return
		}
		h[c], h[i] = h[i], h[c]
		h[c].hpos, h[i].hpos = int32(c), int32(i)
		i = c
	}
}

// topLevels returns the highest priority with a visible bucket in the
// tiers below limit and how many visible buckets have it; ok is false when
// there are none.
func (q *queue) topLevels(below int) (prio int16, total int, ok bool) {
	for t := 0; t < below; t++ {
		l := q.rand[t].top()
		switch {
		case l == nil:
		case !ok || l.prio > prio:
			prio, total, ok = l.prio, len(l.set), true
		case l.prio == prio:
			total += len(l.set)
		}
	}
	return prio, total, ok
}

// randomEntry returns the r-th visible bucket of priority prio in the
// tiers below limit, prio being the one topLevels found.
func (q *queue) randomEntry(below int, prio int16, r int) *setEntry {
	for t := 0; t < below; t++ {
		l := q.rand[t].top()
		if l == nil || l.prio != prio {
			continue
		}
		if n := len(l.set); r >= n {
			r -= n
			continue
		}
		return &l.set[r]
	}
	panic("sched: random pick out of range")
}
