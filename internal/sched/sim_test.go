package sched

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The randomized invariant simulation of the scheduling rules: many seeds, a
// virtual clock, random mixes of every job kind and queue order, workers
// joining, leaving and losing leases. After every operation the core's own
// checker runs and an independent model (sim_model_test.go) judges the answers,
// the events and every start. A violation prints the seed and the list of
// operations that reproduces it; -sim.seed=N replays one seed.

var (
	simSeedFlag   = flag.Uint64("sim.seed", 0, "run only this simulation seed")
	simSeedsFlag  = flag.Int("sim.seeds", 300, "number of simulation seeds")
	simEventsFlag = flag.Int("sim.events", 300, "operations per simulation seed")
)

// TestSimulationKeepsInvariants runs -sim.seeds seeded simulations of
// -sim.events operations each (300 × 300 by default, about 7 s with -race),
// checking every invariant after every operation, and drains each to Idle.
func TestSimulationKeepsInvariants(t *testing.T) {
	first, last := uint64(1), uint64(*simSeedsFlag)
	if *simSeedFlag != 0 {
		first, last = *simSeedFlag, *simSeedFlag
	}
	for seed := first; seed <= last; seed++ {
		if err := simRunSeed(seed, *simEventsFlag); err != nil {
			t.Fatal(err)
		}
	}
}

// simRunSeed runs one seeded simulation of n operations, then drains it.
func simRunSeed(seed uint64, n int) error {
	src := simRandSource{rand.New(rand.NewPCG(seed, 0x5eed))}
	name := fmt.Sprintf("seed %d (replay: go test -run TestSimulationKeepsInvariants -sim.seed=%d -sim.events=%d)", seed, seed, n)
	return simRunFrom(src, name, seed, n)
}

// simRunFrom draws up to maxOps operations from src, applies them, then drains
// the scheduler; it returns the first violation with the operations so far.
func simRunFrom(src simSource, name string, seed uint64, maxOps int) error {
	g := newSimGen(src)
	tiers := g.tiers()
	r, err := newSimRun(tiers, seed)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, simTiersString(tiers), err)
	}
	for i := 0; i < maxOps && !src.done(); i++ {
		if err := r.do(g.next(r.m)); err != nil {
			return r.fail(name, err)
		}
	}
	if err := r.drain(); err != nil {
		return r.fail(name, err)
	}
	return nil
}

// TestSimulationCatchesBrokenRules shows that the simulation's outside
// checks fail when the core breaks a rule. Each case tells the core one
// thing and the model another, as a core that ignored the rule would
// behave, then dispatches: the check named after the rule must fail, and
// the report must list the operations that led there.
func TestSimulationCatchesBrokenRules(t *testing.T) {
	tests := []struct {
		name  string
		slots int
		setup func(t *testing.T, r *simRun)
		want  string
	}{
		{"KeyLimitHoldsAcrossStarts", 2, func(t *testing.T, r *simRun) {
			simDo(t, r, simSubmitOp(JobSpec{ID: "j1", Queue: "q0", Keys: []string{"k0"}}))
			simDo(t, r, simSubmitOp(JobSpec{ID: "j2", Queue: "q0", Keys: []string{"k0"}}))
			simNoErr(t, r.s.SetKeyLimit("k0", 2))
			r.m.setKeyLimit("k0", 1)
		}, "key k0 already has 1 running holders, limit 1"},
		{"OneRunningJobPerGroup", 2, func(t *testing.T, r *simRun) {
			simLieSubmit(t, r, JobSpec{ID: "j1", Queue: "q0"}, JobSpec{ID: "j1", Queue: "q0", Group: "g0"})
			simLieSubmit(t, r, JobSpec{ID: "j2", Queue: "q0"}, JobSpec{ID: "j2", Queue: "q0", Group: "g0"})
		}, "group g0 already runs a job"},
		{"NeverReadWithWrite", 2, func(t *testing.T, r *simRun) {
			simLieSubmit(t, r, JobSpec{ID: "j1", Queue: "q0"}, JobSpec{ID: "j1", Queue: "q0", Mode: ModeRead})
			simLieSubmit(t, r, JobSpec{ID: "j2", Queue: "q0"}, JobSpec{ID: "j2", Queue: "q0", Mode: ModeWrite})
		}, "write starts while 1 reads run"},
		{"StrictQueueStartsInRequestOrder", 2, func(t *testing.T, r *simRun) {
			r.m.queues["q0"] = QueueSpec{Name: "q0", Order: OrderStrict}
			simDo(t, r, simOp{kind: simSetKeyLimit, id: "k0", n: 1})
			simDo(t, r, simSubmitOp(JobSpec{ID: "j0", Queue: "q0", Keys: []string{"k0"}}))
			simDo(t, r, simOp{kind: simDispatch})
			simDo(t, r, simSubmitOp(JobSpec{ID: "j1", Queue: "q0", Keys: []string{"k0"}}))
			simDo(t, r, simSubmitOp(JobSpec{ID: "j2", Queue: "q0"}))
		}, "strict queue q0: j2 overtakes [j1]"},
		{"NoStartBeforeDependenciesSucceed", 2, func(t *testing.T, r *simRun) {
			simDo(t, r, simSubmitOp(JobSpec{ID: "j1", Queue: "q0"}))
			simDo(t, r, simSubmitOp(JobSpec{ID: "j2", Queue: "q0"}))
			r.m.jobs["j2"].deps = []string{"j1"}
		}, "start of j2 on w0: dependency j1 is running"},
		{"HighestPriorityQueueWins", 1, func(t *testing.T, r *simRun) {
			simNoErr(t, r.s.DefineQueue(QueueSpec{Name: "q1", Priority: -1})) // the core serves q0 first
			r.m.queues["q1"] = QueueSpec{Name: "q1", Priority: 1}
			simDo(t, r, simSubmitOp(JobSpec{ID: "j1", Queue: "q0"}))
			simDo(t, r, simSubmitOp(JobSpec{ID: "j2", Queue: "q1"}))
		}, "queue q1 (priority 1) has work for w0, but q0 (priority 0) was served"},
		{"NoIdleWorkerWhileWorkWaits", 1, func(t *testing.T, r *simRun) {
			simNoErr(t, r.s.DefineQueue(QueueSpec{Name: "q0", Paused: true}))
			simDo(t, r, simSubmitOp(JobSpec{ID: "j1", Queue: "q0"}))
		}, "after Dispatch, w0 has 1 free slots and queue q0 has work"},
		{"OnlySubmittedJobsStart", 1, func(t *testing.T, r *simRun) {
			simNoErr(t, r.s.Submit(JobSpec{ID: "ghost", Queue: "q0"}))
		}, "start of ghost on w0: the test never submitted it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := newSimRun(threeTiers(2, 1), 1)
			simNoErr(t, err)
			simDo(t, r, simOp{kind: simDefineQueue, queue: QueueSpec{Name: "q0"}})
			simDo(t, r, simOp{kind: simAddWorker, worker: WorkerSpec{ID: "w0", Slots: tt.slots, Push: true}})
			tt.setup(t, r)
			err = r.do(simOp{kind: simDispatch})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("dispatch: error %v, want one saying %q", err, tt.want)
			}
			report := r.fail("seed 7", err).Error()
			for _, want := range []string{"seed 7", "#1 define-queue q0", "#2 add-worker w0", "dispatch"} {
				if !strings.Contains(report, want) {
					t.Fatalf("report %q lacks %q", report, want)
				}
			}
		})
	}
}

func simSubmitOp(sp JobSpec) simOp { return simOp{kind: simSubmit, jobs: []JobSpec{sp}} }

func simDo(t *testing.T, r *simRun, op simOp) {
	t.Helper()
	if err := r.do(op); err != nil {
		t.Fatalf("%s: %v", op, err)
	}
}

// simLieSubmit submits one spec to the core and records another in the
// model, as if the core had ignored the difference.
func simLieSubmit(t *testing.T, r *simRun, core, model JobSpec) {
	t.Helper()
	r.m.beginOp()
	simNoErr(t, r.s.Submit(core))
	r.m.submit([]JobSpec{model}, nil)
}

func simNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Regressions the simulation found. A worker re-registered with fewer
// slots than it runs keeps its extra jobs (AddWorker); the tier-0 limit,
// every slot, then counts fewer slots than jobs. The other workers' free
// slots stay usable, and a default task started on one of them still gets
// the largest tier the limits of tiers 1..n allow.

// overcommitted returns a harness whose worker b1 runs two fast jobs on
// one slot and whose worker b2 has its single slot free.
func overcommitted(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, threeTiers(2, 1), 1)
	h.queue(QueueSpec{Name: "asy"})
	h.worker(WorkerSpec{ID: "b1", Slots: 2, Push: true})
	h.submit(JobSpec{ID: "f1", Queue: "asy"}, JobSpec{ID: "f2", Queue: "asy"})
	wantIDs(t, "started", h.dispatch(), "f1", "f2")
	h.worker(WorkerSpec{ID: "b1", Slots: 1, Push: true})
	h.worker(WorkerSpec{ID: "b2", Slots: 1, Push: true})
	return h
}

// TestFreeSlotServesWhileAnotherWorkerIsOvercommitted: Dispatch pushes to
// a free slot although another worker runs more jobs than its slots, and
// the invariants hold.
func TestFreeSlotServesWhileAnotherWorkerIsOvercommitted(t *testing.T) {
	h := overcommitted(t)
	h.submit(JobSpec{ID: "f3", Queue: "asy"})
	wantIDs(t, "started", h.dispatch(), "f3")
	if w := h.s.run(h.s.jobs.get("f3")).worker.id; w != "b2" {
		t.Fatalf("f3 runs on %s, want the free b2", w)
	}
}

// TestDefaultTaskOnFreeSlotGetsLargestTierWhileAnotherWorkerIsOvercommitted:
// a default task pushed to a free slot starts in the largest tier the
// limits of tiers 1..n allow, not in tier 0 because another worker is
// overcommitted.
func TestDefaultTaskOnFreeSlotGetsLargestTierWhileAnotherWorkerIsOvercommitted(t *testing.T) {
	h := overcommitted(t)
	h.submit(JobSpec{ID: "d1", Queue: "asy", Default: true})
	wantIDs(t, "started", h.dispatch(), "d1")
	if got := h.runTier("d1"); got != 2 {
		t.Fatalf("d1 started in tier %d; the medium and slow limits have room, want slow (2)", got)
	}
}

// TestPulledDefaultTaskGetsLargestTierWhileAnotherWorkerIsOvercommitted:
// the same for a default task an agent pulls, when the overcommitted
// worker makes the tier-0 count reach every slot.
func TestPulledDefaultTaskGetsLargestTierWhileAnotherWorkerIsOvercommitted(t *testing.T) {
	h := overcommitted(t)
	simNoErr(t, h.s.RemoveWorker("b2"))
	h.worker(WorkerSpec{ID: "a1", Slots: 1}) // two slots, two jobs: tier 0 counts as full
	h.submit(JobSpec{ID: "d1", Queue: "asy", Default: true})
	wantIDs(t, "pulled", h.pull("a1", 1), "d1")
	if got := h.runTier("d1"); got != 2 {
		t.Fatalf("d1 started in tier %d; the medium and slow limits have room, want slow (2)", got)
	}
}
