package table

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// Ids that differ only in their last digit or letter — a driver numbering
// its jobs — must land in one group of the index, each at its own entry,
// so that a run of submissions reads a cache line or two instead of one
// line per job.
func TestCounterIDsShareAGroup(t *testing.T) {
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	seed := NewSeed()
	var x IDIndex
	x.Init(1 << 20)
	for _, prefix := range []string{"asy-123", "j", "job-", "4f1c2b7e-9"} {
		groups := map[uint64]bool{}
		entries := map[uint64]bool{}
		for _, c := range []byte(alnum) {
			i := x.Start(IDHash(prefix+string(c), seed))
			groups[x.Group(i)] = true
			entries[i] = true
		}
		if len(groups) != 1 || len(entries) != len(alnum) {
			t.Errorf("%q + one digit or letter: %d groups, %d distinct entries (want 1 and %d)",
				prefix, len(groups), len(entries), len(alnum))
		}
		lines := map[uint64]bool{}
		for c := '0'; c <= '9'; c++ {
			lines[x.Start(IDHash(prefix+string(c), seed))/8] = true // 8 entries a cache line
		}
		if len(lines) > 3 { // ten neighbours: two lines, three when they start at a line's end
			t.Errorf("%q + a decimal digit: %d cache lines of the index (want at most 3)", prefix, len(lines))
		}
	}
}

// An entry keeps what Insert was given, and dropping the stale entries
// keeps every live one findable from its home, through the backward
// shifts that deletion makes in crowded columns.
func TestIDIndexDropsOnlyStaleEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const seed = 0x5eed // a fixed hash seed: the same columns every run
	var x IDIndex
	x.Init(4 * MinIDIndex)
	const n = 300 // nearly three eighths of the index: runs in many columns
	gen := make([]uint8, n)
	hashes := make([]uint64, n)
	for i := range uint32(n) {
		hashes[i] = IDHash("id-"+strconv.Itoa(int(i)), seed)
		if !x.Insert(hashes[i], i, 0) {
			t.Fatalf("insert %d failed", i)
		}
	}
	live := map[uint32]bool{}
	for i := range uint32(n) {
		if rng.IntN(2) == 0 {
			gen[i]++ // freed: its entry goes stale
		} else {
			live[i] = true
		}
	}
	x.DropStale(gen)
	if x.Used() != len(live) {
		t.Fatalf("%d entries used after dropping stale ones, want %d", x.Used(), len(live))
	}
	for num := range live {
		if !x.finds(hashes[num], num) {
			t.Errorf("entry of %d lost", num)
		}
	}
}

// finds says whether a probe from the home of h reaches the entry of num.
func (x *IDIndex) finds(h uint64, num uint32) bool {
	i := x.Start(h)
	for d := 0; d <= MaxDist; d, i = d+1, x.Next(i) {
		e := x.At(i)
		if e == 0 {
			return false
		}
		if IDTag(e) == IDHashTag(h) && IDNum(e) == num {
			return true
		}
	}
	return false
}

// Growth and shrinking keep live entries between an eighth and three
// eighths of the index.
func TestIDIndexFitsItsLiveEntries(t *testing.T) {
	for _, c := range []struct {
		size, live, want int
	}{
		{MinIDIndex, 0, MinIDIndex},
		{MinIDIndex, 96, 2 * MinIDIndex},
		{1 << 20, 1000, 4096},
	} {
		x := IDIndex{live: c.live}
		x.Init(c.size)
		if got := x.Fit(); got != c.want {
			t.Errorf("%d live in %d entries: fit %d, want %d", c.live, c.size, got, c.want)
		}
	}
}
