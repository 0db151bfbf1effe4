package sched

import (
	"testing"
	"time"
)

// adoptCase adopts one job into a scheduler with a worker "w" of the given
// slots, the three tiers with medium limit 2 and slow limit 1, and some
// jobs already adopted before it.
type adoptCase struct {
	name        string
	slots       int
	before      []adoption
	adopt       adoption
	wantErr     error
	wantTier    int
	wantDefault bool
	wantInter   bool
}

type adoption struct {
	spec        JobSpec
	worker      string
	tier        int
	interactive bool
	ago         time.Duration
}

func (h *harness) adopt(a adoption) (Assignment, error) {
	h.t.Helper()
	a.spec.Queue = "q"
	if a.worker == "" {
		a.worker = "w"
	}
	started := h.clk.Now().Add(-a.ago)
	if a.interactive {
		return h.s.AdoptInteractive(a.spec, a.worker, started)
	}
	return h.s.Adopt(a.spec, a.worker, a.tier, started)
}

func TestAdopt(t *testing.T) {
	cases := []adoptCase{
		{name: "fixed tier", slots: 2, adopt: adoption{spec: JobSpec{ID: "a", Tier: 1}, tier: 1, ago: time.Second}, wantTier: 1},
		{name: "default in slow tier", slots: 2, adopt: adoption{spec: JobSpec{ID: "a", Default: true}, tier: 2}, wantTier: 2, wantDefault: true},
		{name: "downgraded default in fast tier", slots: 2, adopt: adoption{spec: JobSpec{ID: "a", Default: true}, tier: 0}, wantTier: 0, wantDefault: true},
		{name: "interactive", slots: 1, adopt: adoption{spec: JobSpec{ID: "a"}, interactive: true}, wantTier: 0, wantInter: true},
		{name: "past the worker's slots", slots: 1,
			before: []adoption{{spec: JobSpec{ID: "x"}}},
			adopt:  adoption{spec: JobSpec{ID: "a"}}, wantTier: 0},
		{name: "past the slow limit", slots: 4,
			before: []adoption{{spec: JobSpec{ID: "x", Tier: 2}, tier: 2}},
			adopt:  adoption{spec: JobSpec{ID: "a", Tier: 2}, tier: 2}, wantTier: 2},
		{name: "started in the future", slots: 1, adopt: adoption{spec: JobSpec{ID: "a"}, ago: -time.Hour}},
		{name: "tier differs from the job's", slots: 1, adopt: adoption{spec: JobSpec{ID: "a", Tier: 1}, tier: 2}, wantErr: ErrInvalidJob},
		{name: "tier out of range", slots: 1, adopt: adoption{spec: JobSpec{ID: "a", Default: true}, tier: 3}, wantErr: ErrInvalidJob},
		{name: "unknown worker", slots: 1, adopt: adoption{spec: JobSpec{ID: "a"}, worker: "nope"}, wantErr: ErrUnknownWorker},
		{name: "duplicate", slots: 2, before: []adoption{{spec: JobSpec{ID: "a"}}},
			adopt: adoption{spec: JobSpec{ID: "a"}}, wantErr: ErrDuplicateJob},
		{name: "keys", slots: 1, adopt: adoption{spec: JobSpec{ID: "a", Keys: []string{"k"}}}, wantErr: ErrInvalidJob},
		{name: "empty id", slots: 1, adopt: adoption{spec: JobSpec{}}, wantErr: ErrInvalidJob},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, threeTiers(2, 1), 1)
			h.queue(QueueSpec{Name: "q"})
			h.worker(WorkerSpec{ID: "w", Slots: c.slots, Push: true})
			for _, b := range c.before {
				if _, err := h.adopt(b); err != nil {
					t.Fatalf("adopt %s: %v", b.spec.ID, err)
				}
				h.check()
			}
			a, err := h.adopt(c.adopt)
			h.check()
			if c.wantErr != nil {
				wantErr(t, err, c.wantErr)
				if h.s.jobs.get(c.adopt.spec.ID) != nil && len(c.before) == 0 {
					t.Fatalf("a refused adoption left job %q behind", c.adopt.spec.ID)
				}
				return
			}
			if err != nil {
				t.Fatalf("adopt: %v", err)
			}
			if a.JobID != "a" || a.WorkerID != "w" || a.Attempt != 1 || a.Tier != c.wantTier ||
				a.Default != c.wantDefault || a.Interactive != c.wantInter {
				t.Fatalf("assignment %+v", a)
			}
			if got := h.runTier("a"); got != c.wantTier {
				t.Fatalf("runs in tier %d, want %d", got, c.wantTier)
			}
			if started := time.Unix(0, h.s.run(h.s.jobs.get("a")).started); started.After(h.clk.Now()) ||
				(c.adopt.ago > 0 && !started.Equal(h.clk.Now().Add(-c.adopt.ago))) {
				t.Fatalf("started %v, now %v", started, h.clk.Now())
			}
			h.complete("a", Succeeded)
		})
	}
}

// An adopted slow job holds the slow limit: another slow job waits for it,
// a fast one starts beside it.
func TestAdoptedJobsHoldTheirLimits(t *testing.T) {
	h := newHarness(t, threeTiers(2, 1), 1)
	h.queue(QueueSpec{Name: "q"})
	h.worker(WorkerSpec{ID: "w", Slots: 3, Push: true})
	if _, err := h.adopt(adoption{spec: JobSpec{ID: "old", Tier: 2}, tier: 2, ago: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	h.submit(JobSpec{ID: "slow", Queue: "q", Tier: 2}, JobSpec{ID: "fast", Queue: "q"})
	wantIDs(t, "dispatch", h.dispatch(), "fast")
	h.complete("old", Succeeded)
	wantIDs(t, "dispatch after the adopted job ends", h.dispatch(), "slow")
}

// Adopted jobs past a worker's slots start nothing new until enough end.
func TestAdoptedExcessForbidsNewStarts(t *testing.T) {
	h := newHarness(t, threeTiers(2, 1), 1)
	h.queue(QueueSpec{Name: "q"})
	h.worker(WorkerSpec{ID: "w", Slots: 1, Push: true})
	for _, id := range []string{"x", "y"} {
		if _, err := h.adopt(adoption{spec: JobSpec{ID: id}}); err != nil {
			t.Fatal(err)
		}
		h.check()
	}
	h.submit(JobSpec{ID: "next", Queue: "q"})
	wantIDs(t, "dispatch over capacity", h.dispatch())
	h.complete("x", Succeeded)
	wantIDs(t, "dispatch at capacity", h.dispatch())
	h.complete("y", Succeeded)
	wantIDs(t, "dispatch with a free slot", h.dispatch(), "next")
}

// An adopted interactive task is halted when queued work needs its slot,
// and an adopted default task is downgraded for a blocked slow head.
func TestAdoptedTasksFollowTheTierRules(t *testing.T) {
	h := newHarness(t, threeTiers(1, 1), 1)
	h.queue(QueueSpec{Name: "q"})
	h.worker(WorkerSpec{ID: "w", Slots: 2, Push: true})
	if _, err := h.adopt(adoption{spec: JobSpec{ID: "def", Default: true}, tier: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.adopt(adoption{spec: JobSpec{ID: "inter"}, interactive: true}); err != nil {
		t.Fatal(err)
	}
	h.check()
	h.submit(JobSpec{ID: "slow", Queue: "q", Tier: 2})
	wantIDs(t, "dispatch", h.dispatch(), "slow")
	ev := h.s.Events()
	if len(ev) != 2 || ev[0].Kind != EventDowngraded || ev[0].JobID != "def" || ev[0].Tier != 0 ||
		ev[1].Kind != EventHalted || ev[1].JobID != "inter" {
		t.Fatalf("events %+v", ev)
	}
}
