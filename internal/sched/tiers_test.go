package sched

import (
	"testing"
	"time"
)

// The queue cycle (docs/design.md, "Duration tiers and preemption"), one
// scenario per step of the rule. Backends are push workers with one slot each;
// tiers are fast 3 s / medium 10 s / slow 30 s.

const (
	fast   = 0
	medium = 1
	slow   = 2
)

func asyHarness(t *testing.T, backends, mediumLimit, slowLimit int, seed uint64) *harness {
	t.Helper()
	h := newHarness(t, threeTiers(mediumLimit, slowLimit), seed)
	h.queue(QueueSpec{Name: "asy"})
	h.backends(backends)
	return h
}

func task(id string, tier int) JobSpec { return JobSpec{ID: id, Queue: "asy", Tier: tier} }
func deflt(id string) JobSpec          { return JobSpec{ID: id, Queue: "asy", Default: true} }

func (h *harness) start(specs ...JobSpec) {
	h.t.Helper()
	h.submit(specs...)
	var want []string
	for _, sp := range specs {
		want = append(want, sp.ID)
	}
	wantIDs(h.t, "started", h.dispatch(), want...)
}

func (h *harness) interactive(id string) {
	h.t.Helper()
	if _, err := h.s.StartInteractive(JobSpec{ID: id, Queue: "asy"}); err != nil {
		h.t.Fatalf("StartInteractive(%s): %v", id, err)
	}
	h.check()
}

func wantDowngrade(t *testing.T, evs []Event, id string, tier int, stopNow bool) {
	t.Helper()
	for _, e := range evs {
		if e.JobID == id {
			if e.Tier != tier || e.StopNow != stopNow {
				t.Fatalf("downgrade of %s: tier %d stopNow %v, want tier %d stopNow %v", id, e.Tier, e.StopNow, tier, stopNow)
			}
			return
		}
	}
	t.Fatalf("no downgrade of %s in %+v", id, evs)
}

func TestSlowHeadBlockedDowngradesSlowDefaultToMedium(t *testing.T) {
	h := asyHarness(t, 4, 2, 1, 1)
	h.start(deflt("d1"))
	if got := h.runTier("d1"); got != slow {
		t.Fatalf("d1 started in tier %d, want slow", got)
	}
	h.submit(task("s1", slow))
	wantIDs(t, "started", h.dispatch(), "s1")
	evs := h.events(EventDowngraded)
	if len(evs) != 1 {
		t.Fatalf("downgrades %+v, want exactly one", evs)
	}
	wantDowngrade(t, evs, "d1", medium, false)
	if evs[0].Duration != 10*time.Second {
		t.Fatalf("new duration %v, want 10s", evs[0].Duration)
	}
}

func TestSlowHeadBlockedDowngradesToFastWhenMediumLimitAlsoReached(t *testing.T) {
	h := asyHarness(t, 4, 2, 1, 1)
	h.start(deflt("d1"))        // slow: counts toward slow and medium
	h.start(task("m1", medium)) // medium limit now reached (2)
	h.submit(task("s1", slow))
	wantIDs(t, "started", h.dispatch(), "s1")
	wantDowngrade(t, h.events(EventDowngraded), "d1", fast, false)
	if got := h.runTier("d1"); got != fast {
		t.Fatalf("d1 in tier %d, want fast", got)
	}
}

func TestSlowHeadDowngradePicksRandomSlowDefault(t *testing.T) {
	picked := map[string]bool{}
	for seed := uint64(1); seed <= 100 && len(picked) < 2; seed++ {
		h := asyHarness(t, 4, 4, 2, seed)
		h.start(deflt("d1"), deflt("d2"))
		h.submit(task("s1", slow))
		h.dispatch()
		evs := h.events(EventDowngraded)
		if len(evs) != 1 {
			t.Fatalf("seed %d: downgrades %+v, want one", seed, evs)
		}
		picked[evs[0].JobID] = true
	}
	if len(picked) != 2 {
		t.Fatalf("victims over 100 seeds: %v, want both d1 and d2", picked)
	}
}

func TestSlowTasksIgnoredWhileSlowLimitStillReached(t *testing.T) {
	h := asyHarness(t, 4, 2, 1, 1)
	h.start(task("s1", slow)) // a fixed slow task cannot be downgraded
	h.submit(task("s2", slow), task("m1", medium), task("f1", fast))
	wantIDs(t, "started", h.dispatch(), "m1", "f1")
	if h.state("s2") != stateQueued {
		t.Fatalf("s2 state %d, want queued", h.state("s2"))
	}
	if evs := h.events(EventDowngraded); len(evs) != 0 {
		t.Fatalf("unexpected downgrades %+v", evs)
	}
	h.complete("s1", Succeeded)
	wantIDs(t, "after s1", h.dispatch(), "s2")
}

func TestMediumHeadBlockedDowngradesSlowDefaultToFast(t *testing.T) {
	h := asyHarness(t, 4, 1, 1, 1)
	h.start(deflt("d1")) // slow; the medium limit (1) is reached
	h.submit(task("m1", medium))
	wantIDs(t, "started", h.dispatch(), "m1")
	wantDowngrade(t, h.events(EventDowngraded), "d1", fast, false)
}

func TestMediumHeadBlockedDowngradesMediumDefaultWhenNoSlowDefault(t *testing.T) {
	h := asyHarness(t, 4, 2, 1, 1)
	h.start(task("s1", slow)) // fixed slow: slow limit reached
	h.start(deflt("d1"))      // the largest tier left is medium
	if got := h.runTier("d1"); got != medium {
		t.Fatalf("d1 in tier %d, want medium", got)
	}
	h.submit(task("m1", medium))
	wantIDs(t, "started", h.dispatch(), "m1")
	evs := h.events(EventDowngraded)
	if len(evs) != 1 {
		t.Fatalf("downgrades %+v, want one", evs)
	}
	wantDowngrade(t, evs, "d1", fast, false)
	if got := h.runTier("s1"); got != slow {
		t.Fatalf("fixed s1 moved to tier %d", got)
	}
}

func TestMediumTasksIgnoredWhileMediumLimitStillReached(t *testing.T) {
	h := asyHarness(t, 4, 1, 1, 1)
	h.start(task("m1", medium))
	h.submit(task("m2", medium), task("s1", slow), task("f1", fast), deflt("d1"))
	// m2 and s1 are ignored; f1 starts; d1 queues as fast and starts in the
	// largest tier left, fast.
	wantIDs(t, "started", h.dispatch(), "f1", "d1")
	if got := h.runTier("d1"); got != fast {
		t.Fatalf("d1 in tier %d, want fast", got)
	}
	if h.state("m2") != stateQueued || h.state("s1") != stateQueued {
		t.Fatal("m2 and s1 should still be queued")
	}
}

func TestFastLimitReachedDowngradesAllDefaultsToFast(t *testing.T) {
	h := asyHarness(t, 2, 2, 1, 1)
	h.start(deflt("d1")) // slow
	h.start(deflt("d2")) // medium (slow limit reached)
	if h.runTier("d1") != slow || h.runTier("d2") != medium {
		t.Fatalf("tiers %d %d, want slow medium", h.runTier("d1"), h.runTier("d2"))
	}
	h.submit(task("f1", fast))
	wantIDs(t, "started", h.dispatch()) // no slot: nothing starts yet
	evs := h.events(EventDowngraded)
	if len(evs) != 2 {
		t.Fatalf("downgrades %+v, want both defaults", evs)
	}
	wantDowngrade(t, evs, "d1", fast, false)
	wantDowngrade(t, evs, "d2", fast, false)
	if h.s.count(fast) != 2 {
		t.Fatalf("fast count %d: downgrades must not change it", h.s.count(fast))
	}
	h.complete("d1", Succeeded)
	wantIDs(t, "after d1", h.dispatch(), "f1")
}

func TestFastLimitReachedHaltsRandomInteractive(t *testing.T) {
	halted := map[string]bool{}
	for seed := uint64(1); seed <= 100 && len(halted) < 2; seed++ {
		h := asyHarness(t, 2, 2, 1, seed)
		h.interactive("i1")
		h.interactive("i2")
		h.submit(task("f1", fast))
		wantIDs(t, "started", h.dispatch(), "f1") // the halted task's slot is free at once
		evs := h.events(EventHalted)
		if len(evs) != 1 {
			t.Fatalf("seed %d: halts %+v, want one", seed, evs)
		}
		halted[evs[0].JobID] = true
		if h.state(evs[0].JobID) != stateDone {
			t.Fatalf("halted %s still known", evs[0].JobID)
		}
	}
	if len(halted) != 2 {
		t.Fatalf("halted over 100 seeds: %v, want both", halted)
	}
}

func TestDefaultStartsInLargestTierLimitsAllow(t *testing.T) {
	cases := []struct {
		name    string
		before  []JobSpec
		want    int
		backend int
	}{
		{"idle server: slow", nil, slow, 4},
		{"slow limit reached: medium", []JobSpec{task("s", slow)}, medium, 4},
		{"medium limit reached: fast", []JobSpec{task("s", slow), task("m", medium)}, fast, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := asyHarness(t, c.backend, 2, 1, 1)
			if len(c.before) > 0 {
				h.start(c.before...)
			}
			h.start(deflt("d"))
			if got := h.runTier("d"); got != c.want {
				t.Fatalf("default started in tier %d, want %d", got, c.want)
			}
		})
	}
}

func TestDowngradedTaskPastNewTierStopsAtOnce(t *testing.T) {
	cases := []struct {
		name     string
		elapsed  time.Duration
		mediumOK bool
		tier     int
		stopNow  bool
	}{
		{"to fast after 5s: stop", 5 * time.Second, false, fast, true},
		{"to fast after 2s: go on", 2 * time.Second, false, fast, false},
		{"to medium after 12s: stop", 12 * time.Second, true, medium, true},
		{"to medium after 5s: go on", 5 * time.Second, true, medium, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := asyHarness(t, 4, 2, 1, 1)
			h.start(deflt("d1"))
			if !c.mediumOK {
				h.start(task("m1", medium)) // medium limit reached: target is fast
			}
			h.clk.advance(c.elapsed)
			h.submit(task("s1", slow))
			h.dispatch()
			wantDowngrade(t, h.events(EventDowngraded), "d1", c.tier, c.stopNow)
			if h.state("d1") != stateRunning {
				t.Fatal("d1 must run until its backend reports the stop")
			}
		})
	}
}

func TestInteractiveDeniedWhenNoSlotFreeDowngradesOneDefault(t *testing.T) {
	t.Run("slow default to medium", func(t *testing.T) {
		h := asyHarness(t, 3, 3, 2, 1)
		h.start(deflt("d1"), deflt("d2")) // both slow
		h.start(task("f1", fast))
		_, err := h.s.StartInteractive(JobSpec{ID: "i1", Queue: "asy"})
		wantErr(t, err, ErrDenied)
		h.check()
		evs := h.events(EventDowngraded)
		if len(evs) != 1 || evs[0].Tier != medium {
			t.Fatalf("downgrades %+v, want one default to medium", evs)
		}
	})
	t.Run("else medium default to fast", func(t *testing.T) {
		h := asyHarness(t, 2, 2, 1, 1)
		h.start(task("s1", slow))
		h.start(deflt("d1")) // medium
		_, err := h.s.StartInteractive(JobSpec{ID: "i1", Queue: "asy"})
		wantErr(t, err, ErrDenied)
		wantDowngrade(t, h.events(EventDowngraded), "d1", fast, false)
	})
	t.Run("no default: nothing changes", func(t *testing.T) {
		h := asyHarness(t, 1, 1, 1, 1)
		h.start(task("f1", fast))
		_, err := h.s.StartInteractive(JobSpec{ID: "i1", Queue: "asy"})
		wantErr(t, err, ErrDenied)
		if evs := h.s.Events(); len(evs) != 0 {
			t.Fatalf("events %+v, want none", evs)
		}
	})
}

func TestInteractiveTasksNeverQueue(t *testing.T) {
	h := asyHarness(t, 1, 1, 1, 1)
	h.start(task("f1", fast))
	if _, err := h.s.StartInteractive(JobSpec{ID: "i1", Queue: "asy"}); err == nil {
		t.Fatal("interactive task accepted with no free slot")
	}
	snap := h.s.Snapshot()
	if snap.Queued != 0 || snap.Interactive != 0 || h.state("i1") != stateDone {
		t.Fatalf("denied interactive task left a trace: %+v", snap)
	}
	h.complete("f1", Succeeded)
	wantIDs(t, "after a slot frees", h.dispatch())
	a, err := h.s.StartInteractive(JobSpec{ID: "i1", Queue: "asy"})
	if err != nil || !a.Interactive || a.Tier != fast || a.Duration != 0 {
		t.Fatalf("StartInteractive with a free slot: %+v, %v", a, err)
	}
}

func TestCycleRepeatsUntilNoFreeSlot(t *testing.T) {
	h := asyHarness(t, 3, 2, 1, 1)
	h.submit(task("f1", fast), task("f2", fast), task("f3", fast), task("f4", fast))
	wantIDs(t, "started", h.dispatch(), "f1", "f2", "f3")
	h.complete("f2", Succeeded)
	wantIDs(t, "after f2", h.dispatch(), "f4")
}

func TestSharedLimitsFollowSlotCount(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "asy"})
	h.backends(8)
	if got := h.s.TierLimits(); got[0] != 8 || got[1] != 4 || got[2] != 2 {
		t.Fatalf("limits with 8 slots %v, want [8 4 2]", got)
	}
	if err := h.s.RemoveWorker("b8"); err != nil {
		t.Fatal(err)
	}
	if got := h.s.TierLimits(); got[0] != 7 || got[1] != 4 || got[2] != 2 {
		t.Fatalf("limits with 7 slots %v, want [7 4 2] (rounded up)", got)
	}
}
