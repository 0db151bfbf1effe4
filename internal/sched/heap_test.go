package sched

import (
	"math/rand/v2"
	"testing"
)

// The 4-ary winner tree must name the least key among its leaves after any
// mix of additions, updates and removals, through growth from 4 to 1,024
// leaves, with every node the least of its four children and every
// bucket's leaf naming that bucket.
func TestWinnerTreeNamesTheLeastKey(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var tree winnerTree
		buckets := make([]bucket, 600)
		keys := map[uint32]uint64{} // bucket number → key, for buckets in the tree
		for n := range buckets {
			buckets[n] = bucket{num: uint32(n), pos: -1}
		}
		for op := range 5_000 {
			b := &buckets[rng.IntN(len(buckets))]
			key := rng.Uint64N(1 << 40)
			switch {
			case b.pos < 0:
				tree.add(b, key, b.num+1)
				keys[b.num] = key
			case rng.IntN(3) == 0:
				tree.remove(b)
				delete(keys, b.num)
			default:
				tree.update(b, key, b.num+1)
				keys[b.num] = key
			}
			checkWinnerTree(t, &tree, buckets, keys, seed, op)
		}
	}
}

func checkWinnerTree(t *testing.T, tree *winnerTree, buckets []bucket, keys map[uint32]uint64, seed uint64, op int) {
	t.Helper()
	least, want := noKey, uint32(0)
	for n, k := range keys {
		if k < least {
			least, want = k, n
		}
	}
	e, ok := tree.top()
	if ok != (len(keys) > 0) || ok && (e.key != least || e.b != want || e.first != want+1) {
		t.Fatalf("seed %d op %d: top %+v %v, want key %d of bucket %d", seed, op, e, ok, least, want)
	}
	if tree.len() != len(keys) {
		t.Fatalf("seed %d op %d: %d leaves in use, %d buckets", seed, op, tree.len(), len(keys))
	}
	for n, k := range keys {
		if l := tree.w[tree.k+int(buckets[n].pos)]; l.key != k || l.b != n {
			t.Fatalf("seed %d op %d: bucket %d's leaf holds %+v", seed, op, n, l)
		}
	}
	for i, first := range tree.internal {
		kids := tree.w[first : first+4]
		if tree.w[i].key != min(kids[0].key, kids[1].key, kids[2].key, kids[3].key) {
			t.Fatalf("seed %d op %d: node %d is not the least of its children", seed, op, i)
		}
	}
}
