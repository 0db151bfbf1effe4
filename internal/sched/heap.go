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

// bucketSet is the ready index of a random queue's tier: the visible
// buckets in no order; a bucket's pos is its index here. A visible
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

// winnerTree is the ready index of a FIFO queue's tier: a tournament tree
// over the visible buckets, keyed by the sort key of each bucket's first
// job, so that the root names the queue's next job. Each visible bucket
// keeps one leaf (its pos) for as long as it stays visible; an update
// replays the leaf's path to the root and stops where nothing changes. No
// other bucket's record is touched, unlike a heap, whose moves must tell
// every moved bucket its new index.
//
// The tree is 4-ary: the children of node i are nodes 4i..4i+3, so that
// four siblings (16 bytes each) fill one cache line and a path has half
// the levels of a binary tree. Node 1 is the root; the nodes of level L
// are [4^L, 2·4^L), the leaves the last level; the indexes in between are
// unused.
type winnerTree struct {
	w    []treeEntry // w[1] is the winner; leaf l is w[k+l]
	k    int         // leaves, a power of four
	free []int32     // free leaves
}

type treeEntry struct {
	key   uint64 // noKey for a free leaf
	b     uint32 // bucket number
	first uint32 // slot of the bucket's first job
}

const noKey = ^uint64(0)

// top returns the winner; ok is false when no bucket is visible.
func (t *winnerTree) top() (e treeEntry, ok bool) {
	if t.k == 0 || t.w[1].key == noKey {
		return treeEntry{}, false
	}
	return t.w[1], true
}

// len returns the number of visible buckets.
func (t *winnerTree) len() int { return t.k - len(t.free) }

// add gives a bucket a leaf.
func (t *winnerTree) add(b *bucket, key uint64, first uint32) {
	if len(t.free) == 0 {
		t.grow()
	}
	n := len(t.free) - 1
	b.pos = t.free[n]
	t.free = t.free[:n]
	t.set(b.pos, treeEntry{key, b.num, first})
}

// update gives a bucket's leaf a new first job and its key. The bucket's
// number is read from the leaf, whose line the update writes anyway, not
// from the second line of the bucket's record.
func (t *winnerTree) update(b *bucket, key uint64, first uint32) {
	leaf := t.w[t.k+int(b.pos)]
	t.set(b.pos, treeEntry{key, leaf.b, first})
}

// remove frees a bucket's leaf.
func (t *winnerTree) remove(b *bucket) {
	t.set(b.pos, treeEntry{key: noKey})
	t.free = append(t.free, b.pos)
	b.pos = -1
}

func (t *winnerTree) set(leaf int32, e treeEntry) {
	w := t.w
	m := uint(len(w) - 1) // len(w) is a power of two: masking by m proves every index in range
	i := uint(t.k+int(leaf)) & m
	w[i] = e
	for i > 1 {
		e = minOfFour(w, i&^3)
		i >>= 2
		p := &w[i&m]
		if p.key == e.key {
			return // the winners above stay as they are
		}
		*p = e
	}
}

// minOfFour returns the entry with the smallest key among the four
// siblings w[g..g+3] (g a multiple of four).
func minOfFour(w []treeEntry, g uint) treeEntry {
	q := (*[4]treeEntry)(w[g : g+4]) // one bounds check for the four
	a, c := &q[0], &q[2]
	if q[1].key < a.key {
		a = &q[1]
	}
	if q[3].key < c.key {
		c = &q[3]
	}
	if c.key < a.key {
		a = c
	}
	return *a
}

// grow makes four times the leaves, keeping each bucket's leaf.
func (t *winnerTree) grow() {
	k := max(4, 4*t.k)
	w := make([]treeEntry, 2*k)
	copy(w[k:], t.w[t.k:])
	for l := k - 1; l >= t.k; l-- {
		w[k+l] = treeEntry{key: noKey}
		t.free = append(t.free, int32(l))
	}
	for level := k / 4; level >= 1; level /= 4 {
		for i := level; i < 2*level; i++ {
			w[i] = minOfFour(w, uint(4*i))
		}
	}
	t.w, t.k = w, k
}

// internal yields every node above the leaves, with the index of its first
// child.
func (t *winnerTree) internal(yield func(node, firstChild int) bool) {
	for level := t.k / 4; level >= 1; level /= 4 {
		for i := level; i < 2*level; i++ {
			if !yield(i, 4*i) {
				return
			}
		}
	}
}
