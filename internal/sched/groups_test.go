package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Exclusive groups, read/write modes and strict order
// (docs/design.md, "Exclusive read/write groups and strict order"): at most one
// running job per group, never a read with a write, and a strict queue that
// starts jobs in request order with head-of-line blocking. Jobs are fast (tier
// 0), so tier limits never get in the way; only groups, modes and the queue
// order decide.

// rwRig is a scheduler with queues "q" (and "p" when asked) and either push
// backends (Dispatch) or one pull agent "a" with as many slots.
type rwRig struct {
	*harness
	agent bool
}

func newRWRig(t *testing.T, pull bool, slots int, queues ...QueueSpec) rwRig {
	t.Helper()
	h := newHarness(t, nil, 1)
	for _, q := range queues {
		h.queue(q)
	}
	if pull {
		h.worker(WorkerSpec{ID: "a", Slots: slots})
	} else {
		h.backends(slots)
	}
	return rwRig{harness: h, agent: pull}
}

// next starts what may start now and returns the started ids in order.
func (r rwRig) next() []string {
	r.t.Helper()
	if r.agent {
		return r.pull("a", 1000)
	}
	return r.dispatch()
}

// wantNext checks that exactly the given jobs start now, in that order.
func (r rwRig) wantNext(when string, want ...string) {
	r.t.Helper()
	wantIDs(r.t, when, r.next(), want...)
}

func rwJob(id, group string, mode Mode) JobSpec {
	return JobSpec{ID: id, Queue: "q", Group: group, Mode: mode}
}

func rwRead(id, group string) JobSpec  { return rwJob(id, group, ModeRead) }
func rwWrite(id, group string) JobSpec { return rwJob(id, group, ModeWrite) }

func rwInQueue(sp JobSpec, queue string) JobSpec {
	sp.Queue = queue
	return sp
}

// rwWorkerKinds runs a test once with push backends and once with a pull agent.
var rwWorkerKinds = []struct {
	name string
	pull bool
}{{"push", false}, {"pull", true}}

// rwOrders are the queue orders whose next job is determined; tests where a
// single job can start at each step also run with OrderRandom.
var rwOrders = []Order{OrderFIFO, OrderStrict}

var rwAllOrders = []Order{OrderFIFO, OrderStrict, OrderRandom}

// Three jobs of one group start one at a time, whatever the queue order; a
// failure frees the group like a success. Fifo and strict queues start them
// in request order, a random queue in any.
func TestAtMostOneRunningJobPerGroup(t *testing.T) {
	for _, order := range rwAllOrders {
		for _, wk := range rwWorkerKinds {
			t.Run(order.String()+"/"+wk.name, func(t *testing.T) {
				r := newRWRig(t, wk.pull, 4, QueueSpec{Name: "q", Order: order})
				request := []string{"g1a", "g1b", "g1c"}
				for _, id := range request {
					r.submit(rwJob(id, "g1", ModeNone))
				}
				var starts []string
				for range request {
					started := r.next()
					if len(started) != 1 {
						t.Fatalf("started %v at once, want one job of g1", started)
					}
					r.wantNext("while " + started[0] + " holds g1")
					starts = append(starts, started[0])
					r.complete(started[0], FailedAttempt)
				}
				if order == OrderRandom {
					slices.Sort(starts)
				}
				wantIDs(t, "starts", starts, request...)
			})
		}
	}
}

func TestJobsOfDifferentGroupsRunTogether(t *testing.T) {
	r := newRWRig(t, false, 3, QueueSpec{Name: "q", Order: OrderStrict})
	r.submit(rwJob("a", "g1", ModeNone), rwJob("b", "g2", ModeNone), rwJob("c", "", ModeNone))
	r.wantNext("all at once", "a", "b", "c")
}

func TestNeverReadWithWrite(t *testing.T) {
	cases := []struct {
		name         string
		first, later JobSpec
	}{
		{"write blocks read", rwWrite("w1", "g1"), rwRead("r2", "g2")},
		{"read blocks write", rwRead("r1", "g1"), rwWrite("w2", "g2")},
		{"write blocks ungrouped read", rwWrite("w1", "g1"), rwRead("r2", "")},
		{"ungrouped read blocks write", rwRead("r1", ""), rwWrite("w2", "g2")},
	}
	for _, order := range rwAllOrders {
		for _, c := range cases {
			t.Run(order.String()+"/"+c.name, func(t *testing.T) {
				r := newRWRig(t, false, 4, QueueSpec{Name: "q", Order: order})
				r.submit(c.first)
				r.wantNext("first", c.first.ID)
				r.submit(c.later)
				r.wantNext("while the other mode runs")
				r.complete(c.first.ID, Succeeded)
				r.wantNext("after the other mode ended", c.later.ID)
			})
		}
	}
}

func TestReadsOfDifferentGroupsShareAndWritesToo(t *testing.T) {
	cases := []struct {
		name string
		jobs []JobSpec
	}{
		{"reads", []JobSpec{rwRead("r1", "g1"), rwRead("r2", "g2"), rwRead("r3", "")}},
		{"writes", []JobSpec{rwWrite("w1", "g1"), rwWrite("w2", "g2"), rwWrite("w3", "")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRWRig(t, false, 3, QueueSpec{Name: "q", Order: OrderStrict})
			r.submit(c.jobs...)
			r.wantNext("same mode, different groups", c.jobs[0].ID, c.jobs[1].ID, c.jobs[2].ID)
		})
	}
}

func TestTwoReadsInSameGroupSerialize(t *testing.T) {
	for _, order := range rwOrders {
		for _, wk := range rwWorkerKinds {
			t.Run(order.String()+"/"+wk.name, func(t *testing.T) {
				r := newRWRig(t, wk.pull, 2, QueueSpec{Name: "q", Order: order})
				r.submit(rwRead("r1", "g"), rwRead("r2", "g"))
				r.wantNext("first", "r1")
				r.wantNext("while r1 holds g")
				r.complete("r1", Succeeded)
				r.wantNext("after r1", "r2")
			})
		}
	}
}

// The scenario: R1(g1) running, W2(g2) and R3(g3) requested: W2
// waits for R1, R3 waits for W2 although it could run beside R1.
func TestStrictQueueHeadOfLineBlocking(t *testing.T) {
	for _, wk := range rwWorkerKinds {
		t.Run(wk.name, func(t *testing.T) {
			r := newRWRig(t, wk.pull, 4, QueueSpec{Name: "q", Order: OrderStrict})
			r.submit(rwRead("R1", "g1"))
			r.wantNext("R1", "R1")
			r.submit(rwWrite("W2", "g2"), rwRead("R3", "g3"))
			r.wantNext("W2 waits for R1, R3 waits for W2")
			r.complete("R1", Succeeded)
			r.wantNext("after R1", "W2")
			r.wantNext("R3 still waits for W2")
			r.complete("W2", Succeeded)
			r.wantNext("after W2", "R3")
		})
	}
}

func TestStrictQueueGroupBlockedHeadBlocksLaterJobs(t *testing.T) {
	r := newRWRig(t, false, 4, QueueSpec{Name: "q", Order: OrderStrict})
	r.submit(rwJob("a1", "g1", ModeNone))
	r.wantNext("a1", "a1")
	r.submit(rwJob("a2", "g1", ModeNone), rwJob("b", "g2", ModeNone), rwJob("c", "", ModeNone))
	r.wantNext("a2 waits for a1; b and c wait behind a2")
	r.complete("a1", Succeeded)
	r.wantNext("after a1", "a2", "b", "c")
}

// Reads of different groups may share, so a strict queue starts runs of
// reads together, but never a job before one requested earlier.
func TestStrictQueueStartsJobsInRequestOrder(t *testing.T) {
	for _, wk := range rwWorkerKinds {
		t.Run(wk.name, func(t *testing.T) {
			r := newRWRig(t, wk.pull, 8, QueueSpec{Name: "q", Order: OrderStrict})
			r.submit(rwRead("R1", "g1"), rwRead("R2", "g2"), rwWrite("W3", "g3"), rwWrite("W4", "g4"),
				rwRead("R5", "g5"), rwWrite("W6", "g1"))
			waves := [][]string{{"R1", "R2"}, {"W3", "W4"}, {"R5"}, {"W6"}}
			for _, wave := range waves {
				r.wantNext("next wave", wave...)
				for _, id := range wave {
					r.complete(id, Succeeded)
				}
			}
			r.wantNext("all done")
		})
	}
}

// A strict queue starts jobs in request order whatever their priority; a
// fifo queue lets a higher priority go first. Turning a fifo queue strict
// re-files its waiting jobs in request order.
func TestStrictQueueIgnoresJobPriority(t *testing.T) {
	cases := []struct {
		order Order
		want  []string
	}{
		{OrderStrict, []string{"low", "high"}},
		{OrderFIFO, []string{"high", "low"}},
	}
	for _, c := range cases {
		t.Run(c.order.String(), func(t *testing.T) {
			h := newHarness(t, nil, 1)
			h.queue(QueueSpec{Name: "q", Order: c.order})
			h.worker(WorkerSpec{ID: "a", Slots: 1})
			h.submit(JobSpec{ID: "low", Queue: "q"}, JobSpec{ID: "high", Queue: "q", Priority: 5})
			var got []string
			for range 2 {
				ids := h.pull("a", 1)
				got = append(got, ids...)
				h.complete(ids[0], Succeeded)
			}
			wantIDs(t, "start order", got, c.want...)
		})
	}
	t.Run("fifo turned strict", func(t *testing.T) {
		h := newHarness(t, nil, 1)
		h.queue(QueueSpec{Name: "q"})
		h.worker(WorkerSpec{ID: "a", Slots: 1})
		h.submit(JobSpec{ID: "low", Queue: "q"}, JobSpec{ID: "high", Queue: "q", Priority: 5})
		h.queue(QueueSpec{Name: "q", Order: OrderStrict})
		wantIDs(t, "first start", h.pull("a", 1), "low")
	})
}

// In a fifo queue a blocked job is skipped by later admissible ones; in a
// strict queue nothing overtakes it.
func TestBlockedJobSkippedInFifoButNotInStrictQueue(t *testing.T) {
	type step struct {
		complete string
		want     []string
	}
	cases := []struct {
		order        Order
		afterRequest []string
		steps        []step
	}{
		{OrderFIFO, []string{"R3"}, []step{{"R1", nil}, {"R3", []string{"W2"}}}},
		{OrderStrict, nil, []step{{"R1", []string{"W2"}}, {"W2", []string{"R3"}}}},
	}
	for _, c := range cases {
		t.Run(c.order.String(), func(t *testing.T) {
			r := newRWRig(t, false, 4, QueueSpec{Name: "q", Order: c.order})
			r.submit(rwRead("R1", "g1"))
			r.wantNext("R1", "R1")
			r.submit(rwWrite("W2", "g2"), rwRead("R3", "g3"))
			r.wantNext("W2 blocked by R1", c.afterRequest...)
			for _, st := range c.steps {
				r.complete(st.complete, Succeeded)
				r.wantNext("after "+st.complete, st.want...)
			}
		})
	}
}

func TestGroupsAndModesHoldAcrossQueues(t *testing.T) {
	cases := []struct {
		name         string
		first, later JobSpec
	}{
		{"group", rwInQueue(rwJob("a", "g", ModeNone), "p"), rwJob("b", "g", ModeNone)},
		{"two reads in one group", rwInQueue(rwRead("a", "g"), "p"), rwRead("b", "g")},
		{"write blocks read", rwInQueue(rwWrite("a", "g1"), "p"), rwRead("b", "g2")},
		{"read blocks write", rwInQueue(rwRead("a", "g1"), "p"), rwWrite("b", "g2")},
	}
	for _, order := range rwAllOrders {
		for _, c := range cases {
			t.Run(order.String()+"/"+c.name, func(t *testing.T) {
				r := newRWRig(t, false, 4, QueueSpec{Name: "p", Order: order}, QueueSpec{Name: "q", Order: order})
				r.submit(c.first)
				r.wantNext("queue p", "a")
				r.submit(c.later)
				r.wantNext("queue q blocked by queue p's job")
				r.complete("a", Succeeded)
				r.wantNext("after a", "b")
			})
		}
	}
}

// Several reads run; a writer waits behind them in a strict queue and
// starts only once the last read has ended, whatever the order in which the
// reads complete.
func TestCompletionsInAnyOrder(t *testing.T) {
	reads := []string{"R1", "R2", "R3", "R4", "R5"}
	type completionOrder struct {
		name  string
		order []string
	}
	orders := []completionOrder{{"in order", reads}, {"reverse", []string{"R5", "R4", "R3", "R2", "R1"}}}
	for seed := uint64(1); seed <= 5; seed++ {
		perm := append([]string(nil), reads...)
		rand.New(rand.NewPCG(seed, 0)).Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		orders = append(orders, completionOrder{fmt.Sprintf("random %d %v", seed, perm), perm})
	}
	for _, co := range orders {
		for _, wk := range rwWorkerKinds {
			t.Run(co.name+"/"+wk.name, func(t *testing.T) {
				r := newRWRig(t, wk.pull, len(reads)+1, QueueSpec{Name: "q", Order: OrderStrict})
				for i, id := range reads {
					r.submit(rwRead(id, "g"+itoa(i)))
				}
				r.submit(rwWrite("W", "g0"), rwRead("R6", "g9"))
				r.wantNext("reads", reads...)
				r.wantNext("W waits for the reads, R6 for W")
				for i, id := range co.order {
					r.complete(id, Succeeded)
					if i < len(co.order)-1 {
						r.wantNext("after " + id + ": reads still running")
					}
				}
				r.wantNext("after the last read", "W")
				r.complete("W", Succeeded)
				r.wantNext("after W", "R6")
			})
		}
	}
}

// Group and mode gates count running jobs, so completing jobs of several
// groups in any order frees exactly the groups that ended.
func TestGroupCompletionsInAnyOrder(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			r := newRWRig(t, false, 8, QueueSpec{Name: "q"})
			groups := []string{"g1", "g2", "g3", "g4"}
			for _, g := range groups {
				r.submit(rwJob(g+"a", g, ModeNone))
			}
			for _, g := range groups {
				r.submit(rwJob(g+"b", g, ModeNone))
			}
			r.wantNext("one per group", "g1a", "g2a", "g3a", "g4a")
			rand.New(rand.NewPCG(seed, 1)).Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
			for _, g := range groups {
				r.complete(g+"a", Succeeded)
				r.wantNext("after "+g+"a", g+"b")
			}
		})
	}
}
