package sched

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/sched/internal/table"
)

// The job table must behave exactly like a map from id to job under any mix
// of puts, gets and removes, through growth, shrinking and the backward
// shifts that deletion makes in crowded probe runs, with slots reused.
func TestJobIndexBehavesLikeAMap(t *testing.T) {
	// Decimal counters fill neighbouring entries of a group; short
	// base-36 ids fill up to 36 entries of a group; ids ending in any byte
	// put up to four into one entry.
	kinds := []func(n int) string{
		func(n int) string { return "job-" + strconv.Itoa(n) },
		func(n int) string { return strconv.FormatInt(int64(n), 36) },
		func(n int) string { return "x" + string(rune(n/256+'a')) + string(byte(n)) },
	}
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		x := newJobTable()
		want := map[string]*job{}
		name := kinds[seed%uint64(len(kinds))]
		ids := 1 + rng.IntN(3000) // few ids: many collisions and reinsertions
		for op := range 20_000 {
			id := name(rng.IntN(ids))
			switch rng.IntN(3) {
			case 0:
				if want[id] == nil {
					j := x.alloc()
					j.id = id
					want[id] = j
					x.put(j, x.hash(id))
				}
			case 1:
				if j := want[id]; j != nil {
					delete(want, id)
					x.remove(j)
					x.release(j)
				}
			case 2:
				if rng.IntN(100) == 0 { // a sweep clears every stale entry
					x.sweep(nil)
					for i := range uint64(x.index.Len()) {
						if e := x.index.At(i); e != 0 && table.IDGen(e) != x.gen[table.IDNum(e)] {
							t.Fatalf("seed %d op %d: stale entry %d left by a sweep", seed, op, i)
						}
					}
				}
			}
			if got := x.get(id); got != want[id] {
				t.Fatalf("seed %d op %d: get(%s) = %p, want %p", seed, op, id, got, want[id])
			}
			if x.len() != len(want) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, x.len(), len(want))
			}
			// Live entries never fill more than three eighths of the
			// index, live and stale ones never more than three quarters.
			if n := x.index.Len(); 8*x.index.Live() > 3*n || 4*x.index.Used() > 3*n {
				t.Fatalf("seed %d op %d: %d live and %d used entries of %d", seed, op, x.index.Live(), x.index.Used(), n)
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
		if live := int(x.Used()) - len(x.FreeList()); live != len(want) {
			t.Fatalf("seed %d: %d slots in use for %d jobs", seed, live, len(want))
		}
	}
}

func TestJobIndexShrinksWhenEmptied(t *testing.T) {
	x := newJobTable()
	var jobs []*job
	for i := range 10_000 {
		j := x.alloc()
		j.id = strconv.Itoa(i)
		x.put(j, x.hash(j.id))
		jobs = append(jobs, j)
	}
	for _, j := range jobs {
		x.remove(j)
		x.release(j)
	}
	if x.len() != 0 || x.index.Len() > 4*table.MinIDIndex {
		t.Fatalf("after removing everything: %d jobs in %d slots", x.len(), x.index.Len())
	}
}

// A driver may report a completion with the very JobID string of its
// Assignment or with an equal string built elsewhere (decoded from the
// wire); both end the attempt, and a string that only shares the bytes'
// address with a running job's id (a prefix of it) matches nothing.
func TestCompleteFindsTheJobByAnEqualIDFromElsewhere(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "q"})
	h.worker(WorkerSpec{ID: "a", Slots: 4})
	h.submit(JobSpec{ID: "job-one", Queue: "q"}, JobSpec{ID: "job-two", Queue: "q"}, JobSpec{ID: "job", Queue: "q"})
	as, err := h.s.Pull("a", 2)
	if err != nil || len(as) != 2 {
		t.Fatalf("pull: %v %v", as, err)
	}
	prefix := as[0].JobID[:3] // same address as the id's bytes, shorter
	if ack := h.s.Complete(prefix, 1, Succeeded); !ack.Ignored {
		t.Fatalf("completion of %q (queued) acknowledged as %+v", prefix, ack)
	}
	if ack := h.s.Complete(as[0].JobID, as[0].Attempt, Succeeded); ack.Ignored {
		t.Fatalf("completion of %s with its Assignment's string ignored", as[0].JobID)
	}
	copied := strings.Clone(as[1].JobID)
	if ack := h.s.Complete(copied, as[1].Attempt, Succeeded); ack.Ignored {
		t.Fatalf("completion of %s with an equal string ignored", copied)
	}
	h.check()
	if ack := h.s.Complete(copied, as[1].Attempt, Succeeded); !ack.Ignored {
		t.Fatal("a repeated completion was not ignored")
	}
	if got := h.state(as[1].JobID); got != stateDone {
		t.Fatalf("job %s in state %d after completion", as[1].JobID, got)
	}
}

// Ids that differ in any byte, of any length, must spread over the index,
// or lookups slow down as it fills: with 200,000 ids of each kind below
// (probes counted in groups) in
// a table at most three eighths full, no entry may sit more than 40 places
// from its home, and equal strings must hash alike.
func TestIndexProbesStayShortForTypicalIDs(t *testing.T) {
	kinds := map[string]func(i int) string{
		"sequential": func(i int) string { return "j" + strconv.Itoa(i) },
		"short":      func(i int) string { return strconv.FormatInt(int64(i), 36) },
		"base-62":    base62,
		"hex":        func(i int) string { return strconv.FormatUint(uint64(i)*0x9e3779b97f4a7c15, 16) },
		"uuid-like":  func(i int) string { return "4f1c2b7e-" + strconv.Itoa(100000+i) + "-job" },
		"targets": func(i int) string {
			return "tcp://10." + strconv.Itoa(i/65536) + "." + strconv.Itoa(i/256%256) + "." + strconv.Itoa(i%256) + ":443"
		},
	}
	for name, id := range kinds {
		x := newJobTable()
		for i := range 200_000 {
			j := x.alloc()
			j.id = id(i)
			x.put(j, x.hash(j.id))
		}
		worst := uint64(0)
		for i := range uint64(x.index.Len()) {
			if e := x.index.At(i); e != 0 {
				worst = max(worst, table.IDDist(e))
			}
		}
		if worst > 40 {
			t.Errorf("%s ids: an entry sits %d places from home", name, worst)
		}
		if x.hash(id(7)) != x.hash(strings.Clone(id(7))) {
			t.Errorf("%s ids: equal strings hash apart", name)
		}
	}
}

func base62(i int) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := []byte{'x'}
	for ; i > 0; i /= 62 {
		b = append(b, digits[i%62])
	}
	return string(b)
}

// A lookup must end even when every entry of its column is taken, which a
// small index allows: the probe is bounded, not only by an empty entry.
func TestLookupEndsOnAFullColumn(t *testing.T) {
	x := newJobTable()
	perColumn := x.index.Len() / table.GroupSize
	column := func(id string) uint64 { return x.index.Start(x.hash(id)) % table.GroupSize }
	for n := 0; n < perColumn; n++ { // fill column 0
		id := ""
		for k := 0; id == "" || column(id) != 0; k++ {
			id = "id-" + strconv.Itoa(n) + "-" + strconv.Itoa(k)
		}
		j := x.alloc()
		j.id = id
		x.put(j, x.hash(id))
	}
	for g := range perColumn {
		if x.index.At(uint64(g*table.GroupSize)) == 0 {
			t.Fatalf("column 0 not full: group %d empty (index of %d entries)", g, x.index.Len())
		}
	}
	for k := 0; ; k++ {
		if id := "absent-" + strconv.Itoa(k); column(id) == 0 {
			if j := x.get(id); j != nil {
				t.Fatalf("get(%q) = %v, want nil", id, j)
			}
			return
		}
	}
}

// BenchmarkIndexSweep measures the sweep that clears the stale entries of
// the id index, which BenchmarkCycle's window of a million ops does not
// reach: with a million live jobs the index has 4 Mi entries, and a sweep
// runs once live and stale entries fill three quarters of it, that is
// every 2 Mi submissions. It reports the sweep's cost spread over them
// (ns/submission).
//
//	go test -run '^$' -bench IndexSweep -benchtime 3x ./internal/sched/
func BenchmarkIndexSweep(b *testing.B) {
	const live = 1_000_000
	var between int // submissions between two sweeps: from a quarter full to three quarters
	for range b.N {
		b.StopTimer()
		x := newJobTable()
		var jobs []*job
		for i := 0; len(jobs) < live || 4*(x.index.Used()+1) <= 3*x.index.Len(); i++ {
			j := x.alloc()
			j.id = "j" + strconv.Itoa(i)
			x.put(j, x.hash(j.id))
			jobs = append(jobs, j)
			if len(jobs) > live { // the oldest job ends: its entry goes stale
				x.remove(jobs[0])
				x.release(jobs[0])
				jobs = jobs[1:]
			}
		}
		n := x.index.Len()
		between = n / 2
		b.StartTimer()
		x.sweep(nil)
		b.StopTimer()
		// A stale entry whose slot's 8-bit generation came round again
		// looks live to a sweep (lookups compare the id too), so a few more
		// than the live jobs may stay.
		if x.index.Len() != n || x.index.Used() > live+live/100 {
			b.Fatalf("sweep left %d of %d entries used, want %d of %d", x.index.Used(), x.index.Len(), live, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(between), "ns/submission")
}
