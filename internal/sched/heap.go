package sched

// The core's ordered sets. Each element's index is written back to its job
// (job.pos) or bucket, so that it can be removed or re-keyed in O(log n);
// entries carry their sort key inline so that comparing touches only the
// heap's own memory. The heaps are 4-ary: a node's children share a cache
// line, and half as many levels mean half as many moved elements whose
// index must be written back.

// arity is the number of children of a heap node.
const arity = 4

func parent(i int) int     { return (i - 1) / arity }
func firstChild(i int) int { return arity*i + 1 }

// jobHeap orders jobs by sort key (priority, then arrival). The same type
// serves the delayed-retry heap, keyed by the time the job becomes ready.
type jobHeap []jobEntry

type jobEntry struct {
	key  uint64
	slot uint32
}

func (h *jobHeap) push(t *jobTable, key uint64, j *job) {
	*h = append(*h, jobEntry{key, j.slot})
	h.up(t, len(*h)-1)
}

// top returns the slot of the first job; the heap must not be empty.
func (h jobHeap) top() uint32 { return h[0].slot }

// remove takes out the element at index i and returns its job.
func (h *jobHeap) remove(t *jobTable, i int) *job {
	old := *h
	j := t.at(old[i].slot)
	n := len(old) - 1
	if i != n {
		old[i] = old[n]
		t.at(old[i].slot).pos = int32(i)
	}
	*h = old[:n]
	j.pos = -1
	if i < n && !h.down(t, i) {
		h.up(t, i)
	}
	return j
}

func (h jobHeap) up(t *jobTable, i int) {
	e := h[i]
	for i > 0 {
		p := parent(i)
		if h[p].key <= e.key {
			break
		}
		h[i] = h[p]
		t.at(h[i].slot).pos = int32(i)
		i = p
	}
	h[i] = e
	t.at(e.slot).pos = int32(i)
}

func (h jobHeap) down(t *jobTable, i0 int) bool {
	e := h[i0]
	i, n := i0, len(h)
	for {
		first := firstChild(i)
		if first >= n {
			break
		}
		c := first
		for r := first + 1; r < min(first+arity, n); r++ {
			if h[r].key < h[c].key {
				c = r
			}
		}
		if e.key <= h[c].key {
			break
		}
		h[i] = h[c]
		t.at(h[i].slot).pos = int32(i)
		i = c
	}
	h[i] = e
	t.at(e.slot).pos = int32(i)
	return i > i0
}

// slotSet is an unordered set of jobs (the buckets of random queues): 4
// bytes a job, removal by swapping in the last one.
type slotSet []uint32

func (s *slotSet) add(j *job) {
	j.pos = int32(len(*s))
	*s = append(*s, j.slot)
}

func (s *slotSet) swapRemove(t *jobTable, i int) {
	old := *s
	n := len(old) - 1
	j := t.at(old[i])
	if i != n {
		old[i] = old[n]
		t.at(old[i]).pos = int32(i)
	}
	*s = old[:n]
	j.pos = -1
}

// bucketHeap holds a queue's ready buckets for one tier, keyed by the sort
// key of each bucket's first job, which each entry also names so that
// finding the head touches no bucket. Unordered heaps (random queues) are
// plain sets. A bucket's pos is its index here.
type bucketHeap struct {
	ordered bool
	items   []bucketEntry
}

type bucketEntry struct {
	key   uint64
	b     uint32 // bucket number
	first uint32 // slot of the bucket's first job (FIFO)
}

func (h *bucketHeap) len() int { return len(h.items) }

func (h *bucketHeap) push(t *bucketTable, key uint64, b *bucket, first uint32) {
	h.items = append(h.items, bucketEntry{key, b.num, first})
	i := len(h.items) - 1
	b.pos = int32(i)
	if h.ordered {
		h.up(t, i)
	}
}

func (h *bucketHeap) remove(t *bucketTable, i int) {
	n := len(h.items) - 1
	b := t.at(h.items[i].b)
	if i != n {
		h.items[i] = h.items[n]
		t.at(h.items[i].b).pos = int32(i)
	}
	h.items = h.items[:n]
	if i != n && h.ordered {
		if !h.down(t, i) {
			h.up(t, i)
		}
	}
	b.pos = -1
}

// rekey gives the entry at index i a new first job and its key.
func (h *bucketHeap) rekey(t *bucketTable, i int, key uint64, first uint32) {
	old := h.items[i].key
	h.items[i].key, h.items[i].first = key, first
	if !h.ordered {
		return
	}
	if key < old {
		h.up(t, i)
	} else {
		h.down(t, i)
	}
}

func (h *bucketHeap) up(t *bucketTable, i int) {
	e := h.items[i]
	for i > 0 {
		p := parent(i)
		if h.items[p].key <= e.key {
			break
		}
		h.items[i] = h.items[p]
		t.at(h.items[i].b).pos = int32(i)
		i = p
	}
	h.items[i] = e
	t.at(e.b).pos = int32(i)
}

func (h *bucketHeap) down(t *bucketTable, i0 int) bool {
	e := h.items[i0]
	i, n := i0, len(h.items)
	for {
		first := firstChild(i)
		if first >= n {
			break
		}
		c := first
		for r := first + 1; r < min(first+arity, n); r++ {
			if h.items[r].key < h.items[c].key {
				c = r
			}
		}
		if e.key <= h.items[c].key {
			break
		}
		h.items[i] = h.items[c]
		t.at(h.items[i].b).pos = int32(i)
		i = c
	}
	h.items[i] = e
	t.at(e.b).pos = int32(i)
	return i > i0
}
