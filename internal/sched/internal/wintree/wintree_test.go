package wintree

import (
	"math/rand/v2"
	"testing"
)

// The 4-ary winner tree must name the least key among its leaves after any
// mix of additions, updates and removals, through growth from 4 to 1,024
// leaves, with every node the least of its four children and every
// member's leaf naming that member.
func TestWinnerTreeNamesTheLeastKey(t *testing.T) {
	for run := uint64(1); run <= 20; run++ {
		rng := rand.New(rand.NewPCG(run, 7))
		var tree Tree
		leaves := make([]int32, 600) // each member's leaf, or -1
		for n := range leaves {
			leaves[n] = -1
		}
		keys := map[uint32]uint64{} // member → key, for members in the tree
		for op := range 5_000 {
			n := uint32(rng.IntN(len(leaves)))
			key := rng.Uint64N(1 << 40)
			switch {
			case leaves[n] < 0:
				leaves[n] = tree.Add(n, key, n+1)
				keys[n] = key
			case rng.IntN(3) == 0:
				tree.Remove(leaves[n])
				leaves[n] = -1
				delete(keys, n)
			default:
				tree.Update(leaves[n], key, n+1)
				keys[n] = key
			}
			checkWinnerTree(t, &tree, leaves, keys, run, op)
		}
	}
}

func checkWinnerTree(t *testing.T, tree *Tree, leaves []int32, keys map[uint32]uint64, run uint64, op int) {
	t.Helper()
	least, want := NoKey, uint32(0)
	for n, k := range keys {
		if k < least {
			least, want = k, n
		}
	}
	e, ok := tree.Top()
	if ok != (len(keys) > 0) || ok && (e.Key != least || e.Num != want || e.First != want+1) {
		t.Fatalf("run %d op %d: top %+v %v, want key %d of member %d", run, op, e, ok, least, want)
	}
	if tree.Len() != len(keys) {
		t.Fatalf("run %d op %d: %d leaves in use, %d members", run, op, tree.Len(), len(keys))
	}
	for n, k := range keys {
		if l := tree.Leaf(leaves[n]); l.Key != k || l.Num != n {
			t.Fatalf("run %d op %d: member %d's leaf holds %+v", run, op, n, l)
		}
	}
	for i, first := range tree.internal {
		kids := tree.w[first : first+4]
		if tree.w[i].Key != min(kids[0].Key, kids[1].Key, kids[2].Key, kids[3].Key) {
			t.Fatalf("run %d op %d: node %d is not the least of its children", run, op, i)
		}
	}
	if op%100 == 0 {
		if err := tree.Check(); err != nil {
			t.Fatalf("run %d op %d: %v", run, op, err)
		}
	}
}
