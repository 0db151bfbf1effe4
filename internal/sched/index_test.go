package sched

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// The job index must behave exactly like a map from id to job under any mix
// of puts, gets and removes, through growth, shrinking and the backward
// shifts that deletion makes in crowded probe runs.
func TestJobIndexBehavesLikeAMap(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		x := newJobIndex()
		want := map[string]*job{}
		ids := 1 + rng.IntN(3000) // few ids: many collisions and reinsertions
		for op := range 20_000 {
			id := "job-" + strconv.Itoa(rng.IntN(ids))
			switch rng.IntN(3) {
			case 0:
				if want[id] == nil {
					j := &job{id: id}
					want[id] = j
					x.put(j)
				}
			case 1:
				delete(want, id)
				x.remove(id)
			}
			if got := x.get(id); got != want[id] {
				t.Fatalf("seed %d op %d: get(%s) = %p, want %p", seed, op, id, got, want[id])
			}
			if x.len() != len(want) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, x.len(), len(want))
			}
		}
		seen := 0
		for id, j := range x.all() {
			if want[id] != j {
				t.Fatalf("seed %d: all() yields %s→%p, want %p", seed, id, j, want[id])
			}
			seen++
		}
		if seen != len(want) {
			t.Fatalf("seed %d: all() yields %d jobs, want %d", seed, seen, len(want))
		}
		for id, j := range want {
			if x.get(id) != j {
				t.Fatalf("seed %d: lost %s", seed, id)
			}
		}
	}
}

func TestJobIndexShrinksWhenEmptied(t *testing.T) {
	x := newJobIndex()
	for i := range 10_000 {
		x.put(&job{id: strconv.Itoa(i)})
	}
	for i := range 10_000 {
		x.remove(strconv.Itoa(i))
	}
	if x.len() != 0 || len(x.slots) > 4*minIndexSlots {
		t.Fatalf("after removing everything: %d jobs in %d slots", x.len(), len(x.slots))
	}
}
