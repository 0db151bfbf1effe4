package sched

// The ordered and unordered sets of queued jobs and visible buckets that
// write each element's index back into its job (job.pos) or bucket
// (bucket.pos), so that it can be removed or re-keyed in O(log n) or O(1).
// They stay in the rules package because of those writes: a generic
// version in a package of its own would make each one through a function
// value or a generic dictionary, an indirect call for every moved element
// of the hot path. The FIFO queues' tournament tree, which writes into no
// record, is package wintree.
//
// Heap entries carry their sort key inline so that comparing touches only
// the heap's own memory. The heaps are 4-ary: a node's children share a
// cache line, and half as many levels mean half as many moved elements
// whose index must be written back.

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
	j := t.At(old[i].slot)
	n := len(old) - 1
	if i != n {
		old[i] = old[n]
		t.At(old[i].slot).pos = int32(i)
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
		t.At(h[i].slot).pos = int32(i)
		i = p
	}
	h[i] = e
	t.At(e.slot).pos = int32(i)
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
		t.At(h[i].slot).pos = int32(i)
		i = c
	}
	h[i] = e
	t.At(e.slot).pos = int32(i)
	return i > i0
}

// slotSet is an unordered set of jobs (the buckets of random queues): 4
// bytes a job, removal by swapping in the last one.
type slotSet []uint32

func (s *slotSet) add(j *job) {
	j.pos = int32(len(*s))
	*s = append(*s, j.slot)
}

// swapRemove takes job j, at index j.pos, out of the set.
func (s *slotSet) swapRemove(t *jobTable, j *job) {
	old := *s
	i, n := int(j.pos), len(old)-1
	if i != n {
		old[i] = old[n]
		t.At(old[i]).pos = int32(i)
	}
	*s = old[:n]
	j.pos = -1
}

// bucketSet is the ready index of one job priority in a random queue's
// tier (see randLevel): the visible buckets in no order; a bucket's pos is its index here. A visible
// bucket's set of jobs lives in its entry rather than in its record (see
// Scheduler.jobSet), so that a random pick reads the entry, then a slot of
// the set, then the job, and the bucket's record, needed too, is fetched
// alongside instead of before.
type bucketSet []setEntry

type setEntry struct {
	jobs slotSet
	b    uint32 // bucket number
}

// add files a bucket, moving its set of jobs into its entry.
func (s *bucketSet) add(b *bucket) {
	b.pos = int32(len(*s))
	*s = append(*s, setEntry{jobs: b.set, b: b.num})
	b.set = nil
}

// remove takes a bucket out, moving its set of jobs back into its record.
func (s *bucketSet) remove(t *bucketTable, b *bucket) {
	old := *s
	i, n := int(b.pos), len(old)-1
	b.set = old[i].jobs
	if i != n {
		old[i] = old[n]
		t.At(old[i].b).pos = int32(i)
	}
	old[n] = setEntry{}
	*s = old[:n]
	b.pos = -1
}
