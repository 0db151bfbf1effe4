package sched

// timedHeap is a min-heap of values by a time (UnixNano), 4-ary as the
// core's other heaps (arity, parent, firstChild). Its users drop entries
// lazily: an entry that went stale stays until it reaches the top, where
// the user checks it against what it refers to.
type timedHeap[T any] []timed[T]

// timed is a value in a timedHeap and its time.
type timed[T any] struct {
	at int64
	v  T
}

// push adds v at time at.
func (h *timedHeap[T]) push(at int64, v T) {
	*h = append(*h, timed[T]{at, v})
	s := *h
	for i := len(s) - 1; i > 0; {
		p := parent(i)
		if s[p].at <= s[i].at {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

// pop removes and returns the earliest entry.
func (h *timedHeap[T]) pop() timed[T] {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = timed[T]{} // let a pointer in v go
	*h = s[:n]
	h.down(0)
	return top
}

// down moves the entry at i down after its time grew.
func (h timedHeap[T]) down(i int) {
	for {
		m, c := i, firstChild(i)
		for end := min(c+arity, len(h)); c < end; c++ {
			if h[c].at < h[m].at {
				m = c
			}
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// ordered says whether the entry at i is not before its parent (for the
// invariants).
func (h timedHeap[T]) ordered(i int) bool { return i == 0 || h[parent(i)].at <= h[i].at }
