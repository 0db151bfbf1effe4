// Package wintree is the ready index of a FIFO queue's tier in the
// scheduling core: a 4-ary tournament (winner) tree over record numbers,
// each keyed by a 64-bit sort key, whose root names the least.
package wintree

import "fmt"

// Tree is a tournament tree over numbered members (the core's buckets),
// keyed by the sort key of each member's first job, so that the root names
// the next job. Each member keeps one leaf for as long as it stays in the
// tree; an update replays the leaf's path to the root and stops where
// nothing changes. No other member is told anything, unlike a heap, whose
// moves must tell every moved member its new index.
//
// The tree is 4-ary: the children of node i are nodes 4i..4i+3, so that
// four siblings (16 bytes each) fill one cache line and a path has half
// the levels of a binary tree. Node 1 is the root; the nodes of level L
// are [4^L, 2·4^L), the leaves the last level; the indexes in between are
// unused. The zero Tree is empty.
type Tree struct {
	w    []Entry // w[1] is the winner; leaf l is w[k+l]
	k    int     // leaves, a power of four
	free []int32 // free leaves
}

// Entry is what a leaf holds, and each node above the least of its leaves.
type Entry struct {
	Key   uint64 // NoKey for a free leaf
	Num   uint32 // the member's number
	First uint32 // the record of the member's first job
}

// NoKey is the key of a free leaf; no member has it.
const NoKey = ^uint64(0)

// Top returns the winner; ok is false when the tree has no member.
func (t *Tree) Top() (e Entry, ok bool) {
	if t.k == 0 || t.w[1].Key == NoKey {
		return Entry{}, false
	}
	return t.w[1], true
}

// Len returns the number of members.
func (t *Tree) Len() int { return t.k - len(t.free) }

// Add gives member num a leaf and returns it.
func (t *Tree) Add(num uint32, key uint64, first uint32) int32 {
	if len(t.free) == 0 {
		t.grow()
	}
	n := len(t.free) - 1
	leaf := t.free[n]
	t.free = t.free[:n]
	t.set(leaf, Entry{key, num, first})
	return leaf
}

// Update gives a leaf a new first job and its key. The member's number is
// read from the leaf, whose line the update writes anyway.
func (t *Tree) Update(leaf int32, key uint64, first uint32) {
	e := t.w[t.k+int(leaf)]
	t.set(leaf, Entry{key, e.Num, first})
}

// Remove frees a leaf.
func (t *Tree) Remove(leaf int32) {
	t.set(leaf, Entry{Key: NoKey})
	t.free = append(t.free, leaf)
}

// Leaf returns what a leaf holds.
func (t *Tree) Leaf(leaf int32) Entry { return t.w[t.k+int(leaf)] }

// Leaves returns the number of leaves, free or not.
func (t *Tree) Leaves() int { return t.k }

func (t *Tree) set(leaf int32, e Entry) {
	w := t.w
	m := uint(len(w) - 1) // len(w) is a power of two: masking by m proves every index in range
	i := uint(t.k+int(leaf)) & m
	w[i] = e
	for i > 1 {
		e = minOfFour(w, i&^3)
		i >>= 2
		p := &w[i&m]
		if p.Key == e.Key {
			return // the winners above stay as they are
		}
		*p = e
	}
}

// minOfFour returns the entry with the smallest key among the four
// siblings w[g..g+3] (g a multiple of four).
func minOfFour(w []Entry, g uint) Entry {
	q := (*[4]Entry)(w[g : g+4]) // one bounds check for the four
	a, c := &q[0], &q[2]
	if q[1].Key < a.Key {
		a = &q[1]
	}
	if q[3].Key < c.Key {
		c = &q[3]
	}
	if c.Key < a.Key {
		a = c
	}
	return *a
}

// grow makes four times the leaves, keeping each member's leaf.
func (t *Tree) grow() {
	k := max(4, 4*t.k)
	w := make([]Entry, 2*k)
	copy(w[k:], t.w[t.k:])
	for l := k - 1; l >= t.k; l-- {
		w[k+l] = Entry{Key: NoKey}
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
func (t *Tree) internal(yield func(node, firstChild int) bool) {
	for level := t.k / 4; level >= 1; level /= 4 {
		for i := level; i < 2*level; i++ {
			if !yield(i, 4*i) {
				return
			}
		}
	}
}

// Check returns an error unless exactly the free leaves hold NoKey and
// every node holds the least key of its four children.
func (t *Tree) Check() error {
	free := map[int32]bool{}
	for _, l := range t.free {
		free[l] = true
	}
	for l := range t.k {
		if e := t.w[t.k+l]; free[int32(l)] != (e.Key == NoKey) {
			return fmt.Errorf("leaf %d free %v, key %d", l, free[int32(l)], e.Key)
		}
	}
	for i, first := range t.internal {
		kids := t.w[first : first+4]
		least := min(kids[0].Key, kids[1].Key, kids[2].Key, kids[3].Key)
		if t.w[i].Key != least {
			return fmt.Errorf("tree node %d holds %d, its children at least %d", i, t.w[i].Key, least)
		}
	}
	return nil
}
