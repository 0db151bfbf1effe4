package table

import (
	"math/rand/v2"
	"testing"
)

// A SlotMap must find exactly the numbers added and not deleted, under any
// mix of additions and deletions, through growth and shrinking.
func TestSlotMapBehavesLikeAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	hashes := make([]uint64, 5000)
	for i := range hashes {
		hashes[i] = rng.Uint64()
		if i%7 == 0 && i > 0 {
			hashes[i] = hashes[i-1] ^ 1 // neighbours: one probe run
		}
	}
	hashOf := func(n uint32) uint64 { return hashes[n] }
	var m SlotMap
	m.Init(MinSlotMap)
	want := map[uint32]bool{}
	for op := range 50_000 {
		n := uint32(rng.IntN(len(hashes)))
		if want[n] {
			m.Delete(hashes[n], n, hashOf)
			delete(want, n)
		} else {
			m.Add(hashes[n], n, hashOf)
			want[n] = true
		}
		if m.Len() != len(want) {
			t.Fatalf("op %d: %d numbers, want %d", op, m.Len(), len(want))
		}
		if got := m.finds(hashes[n], n); got != want[n] {
			t.Fatalf("op %d: finds %d: %v, want %v", op, n, got, want[n])
		}
	}
	for n := range want {
		if !m.finds(hashes[n], n) {
			t.Fatalf("lost %d", n)
		}
	}
}

// finds says whether a lookup of h reaches the entry of number n.
func (m *SlotMap) finds(h uint64, n uint32) bool {
	for i := m.Start(h); ; i = m.Next(i) {
		e := m.At(i)
		if e == 0 {
			return false
		}
		if SlotTag(e) == HashTag(h) && SlotNum(e) == n {
			return true
		}
	}
}
