package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Random queues order by job priority first
// (docs/design.md, "Per-key limits, priorities and random picks"): a pick
// takes a random ready bucket among those of the highest priority that has
// one, never a job of a lower priority while a higher one is ready.

// TestRandomQueueNeverSkipsAHigherReadyPriority drives a random queue with
// seeded random operations — submissions at priorities −1…2 on keys of limit
// 1, pulls, completions, cancellations and changes of order away and back —
// and checks every pick against a naive recount: the job handed out has the
// highest priority among queued jobs whose key is free.
func TestRandomQueueNeverSkipsAHigherReadyPriority(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { randomPriorityRun(t, seed) })
	}
}

type rpJob struct {
	prio int
	key  string
}

func randomPriorityRun(t *testing.T, seed uint64) {
	h := newHarness(t, nil, seed)
	src := rand.New(rand.NewPCG(seed, 77))
	h.queue(QueueSpec{Name: "scan", Order: OrderRandom})
	h.worker(WorkerSpec{ID: "agent", Slots: 1000})
	if err := h.s.SetKeyLimit("k*", 1); err != nil {
		t.Fatal(err)
	}
	queued := map[string]rpJob{}
	running := map[string]string{} // key → job
	order := OrderRandom
	next := 0
	for step := range 3000 {
		switch op := src.IntN(20); {
		case op < 8:
			next++
			id := fmt.Sprint("j", next)
			jb := rpJob{prio: src.IntN(4) - 1, key: fmt.Sprint("k", src.IntN(6))}
			h.submit(JobSpec{ID: id, Queue: "scan", Priority: jb.prio, Keys: []string{jb.key}})
			queued[id] = jb
		case op < 14:
			got := h.pull("agent", 1)
			best, any := bestReady(queued, running)
			if len(got) == 0 {
				if any && order != OrderStrict { // a strict queue waits for its head
					t.Fatalf("step %d: nothing handed out, yet priority %d is ready", step, best)
				}
				continue
			}
			jb, ok := queued[got[0]]
			if !ok {
				t.Fatalf("step %d: handed out %s, which is not queued", step, got[0])
			}
			if order == OrderRandom && jb.prio != best {
				t.Fatalf("step %d: handed out %s of priority %d while priority %d is ready", step, got[0], jb.prio, best)
			}
			delete(queued, got[0])
			running[jb.key] = got[0]
		case op < 17:
			if key, ok := anyKey(src, running); ok {
				h.complete(running[key], Succeeded)
				delete(running, key)
			}
		case op < 19:
			if ids := sortedIDs(queued); len(ids) > 0 {
				id := ids[src.IntN(len(ids))]
				if err := h.s.Cancel(id); err != nil {
					t.Fatal(err)
				}
				delete(queued, id)
			}
		default:
			order = []Order{OrderFIFO, OrderStrict, OrderRandom, OrderRandom}[src.IntN(4)]
			h.queue(QueueSpec{Name: "scan", Order: order})
		}
	}
}

// bestReady returns the highest priority among queued jobs whose key is
// free, and whether there is one.
func bestReady(queued map[string]rpJob, running map[string]string) (int, bool) {
	best, any := 0, false
	for _, jb := range queued {
		if _, busy := running[jb.key]; !busy && (!any || jb.prio > best) {
			best, any = jb.prio, true
		}
	}
	return best, any
}

func anyKey(src *rand.Rand, running map[string]string) (string, bool) {
	keys := make([]string, 0, len(running))
	for k := range running {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "", false
	}
	slices.Sort(keys)
	return keys[src.IntN(len(keys))], true
}

func sortedIDs(m map[string]rpJob) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestRandomQueuePickIsUniformWithinTheTopPriority: over many seeds, the
// first pick falls on each ready bucket of the highest ready priority about
// equally often — across tiers, whatever a bucket's number of jobs — and
// never on a lower priority, nor on a higher one whose key is full.
func TestRandomQueuePickIsUniformWithinTheTopPriority(t *testing.T) {
	type sub struct {
		key        string
		prio, tier int
		jobs       int
	}
	for _, c := range []struct {
		name string
		subs []sub
		want []string // keys picked, uniformly
	}{
		{"one priority", []sub{{"a", 0, 0, 1}, {"b", 0, 0, 5}, {"c", 0, 0, 2}}, []string{"a", "b", "c"}},
		{"higher priority wins", []sub{{"a", 1, 0, 1}, {"b", 1, 0, 9}, {"c", 1, 0, 3}, {"d", 0, 0, 50}, {"e", -3, 0, 50}}, []string{"a", "b", "c"}},
		{"blocked higher priority is passed over", []sub{{"full", 9, 0, 5}, {"a", 2, 0, 1}, {"b", 2, 0, 1}, {"c", 1, 0, 20}}, []string{"a", "b"}},
		{"tiers share a priority", []sub{{"a", 3, 0, 1}, {"b", 3, 1, 4}, {"c", 3, 2, 1}, {"d", 3, 1, 2}, {"e", 2, 0, 30}}, []string{"a", "b", "c", "d"}},
		{"top priority in a slower tier", []sub{{"a", 0, 0, 9}, {"b", 5, 2, 1}}, []string{"b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const trials = 2400
			counts := map[string]int{}
			for seed := uint64(1); seed <= trials; seed++ {
				h := newHarness(t, threeTiers(10, 10), seed)
				h.queue(QueueSpec{Name: "scan", Order: OrderRandom})
				h.worker(WorkerSpec{ID: "agent", Slots: 100})
				if err := h.s.SetKeyLimit("full", 1); err != nil {
					t.Fatal(err)
				}
				h.submit(JobSpec{ID: "blocker", Queue: "scan", Priority: 100, Keys: []string{"full"}})
				if got := h.pull("agent", 1); !slices.Equal(got, []string{"blocker"}) {
					t.Fatalf("first pull %v, want the blocker", got)
				}
				for _, sb := range c.subs {
					for i := range sb.jobs {
						h.submit(JobSpec{ID: fmt.Sprint(sb.key, i), Queue: "scan", Priority: sb.prio, Tier: sb.tier, Keys: []string{sb.key}})
					}
				}
				got := h.pull("agent", 1)
				if len(got) != 1 {
					t.Fatalf("seed %d: pulled %v", seed, got)
				}
				counts[h.s.jobs.get(got[0]).bucket.sig]++
			}
			n := len(c.want)
			p := 1 / float64(n)
			tol := int(5*math.Sqrt(trials*p*(1-p))) + 1 // 5 standard deviations
			for key, got := range counts {
				if !slices.Contains(c.want, key) {
					t.Fatalf("picks %v: key %s of a lower or blocked priority was picked", counts, key)
				}
				if want := trials / n; got < want-tol || got > want+tol {
					t.Fatalf("picks %v of %d: key %s picked %d times, want %d ± %d", counts, trials, key, got, want, tol)
				}
			}
		})
	}
}
