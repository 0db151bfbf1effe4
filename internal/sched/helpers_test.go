package sched

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// clock is a virtual clock for the core.
type clock struct{ t time.Time }

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// harness wraps a Scheduler for tests: every helper fails the test on an
// unexpected error and checks the invariants after each step.
type harness struct {
	t   testing.TB
	s   *Scheduler
	clk *clock
}

// newHarness builds a scheduler with the given tiers (nil: DefaultTiers) and
// a seeded random source.
func newHarness(t testing.TB, tiers []Tier, seed uint64) *harness {
	t.Helper()
	clk := newClock()
	s, err := New(Config{Tiers: tiers, Now: clk.Now, Rand: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &harness{t: t, s: s, clk: clk}
}

// threeTiers is the design's three-tier configuration with absolute limits.
func threeTiers(medium, slow int) []Tier {
	return []Tier{
		{Name: "fast", Duration: 3 * time.Second},
		{Name: "medium", Duration: 10 * time.Second, Limit: medium},
		{Name: "slow", Duration: 30 * time.Second, Limit: slow},
	}
}

func (h *harness) check() {
	h.t.Helper()
	if err := h.s.CheckInvariants(); err != nil {
		h.t.Fatalf("invariants: %v", err)
	}
}

func (h *harness) queue(spec QueueSpec) {
	h.t.Helper()
	if err := h.s.DefineQueue(spec); err != nil {
		h.t.Fatalf("DefineQueue(%s): %v", spec.Name, err)
	}
	h.check()
}

// backends adds n push workers with one slot each, named b1..bn.
func (h *harness) backends(n int, caps ...string) {
	h.t.Helper()
	for i := 1; i <= n; i++ {
		h.worker(WorkerSpec{ID: "b" + itoa(i), Slots: 1, Push: true, Capabilities: caps})
	}
}

func (h *harness) worker(spec WorkerSpec) {
	h.t.Helper()
	if err := h.s.AddWorker(spec); err != nil {
		h.t.Fatalf("AddWorker(%s): %v", spec.ID, err)
	}
	h.check()
}

func (h *harness) submit(specs ...JobSpec) {
	h.t.Helper()
	for _, sp := range specs {
		if err := h.s.Submit(sp); err != nil {
			h.t.Fatalf("Submit(%s): %v", sp.ID, err)
		}
	}
	h.check()
}

// dispatch runs Dispatch and returns the started job ids in order.
func (h *harness) dispatch() []string {
	h.t.Helper()
	as := h.s.Dispatch()
	h.check()
	return ids(as)
}

func (h *harness) pull(worker string, n int) []string {
	h.t.Helper()
	as, err := h.s.Pull(worker, n)
	if err != nil {
		h.t.Fatalf("Pull(%s, %d): %v", worker, n, err)
	}
	h.check()
	return ids(as)
}

// complete reports the current attempt of a running job as finished.
func (h *harness) complete(id string, out Outcome) Ack {
	h.t.Helper()
	j := h.s.jobs.get(id)
	if j == nil || j.state != stateRunning {
		h.t.Fatalf("complete(%s): job is not running", id)
	}
	ack := h.s.Complete(id, int(j.attempt), out)
	h.check()
	return ack
}

// runTier returns the tier a running job is in.
func (h *harness) runTier(id string) int {
	h.t.Helper()
	j := h.s.jobs.get(id)
	if j == nil || j.state != stateRunning {
		h.t.Fatalf("runTier(%s): job is not running", id)
	}
	return int(h.s.run(j).tier)
}

func (h *harness) state(id string) jobState {
	if j := h.s.jobs.get(id); j != nil {
		return j.state
	}
	return stateDone
}

// events drains the events of the given kind.
func (h *harness) events(kind EventKind) []Event {
	var out []Event
	for _, e := range h.s.Events() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func ids(as []Assignment) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.JobID
	}
	return out
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func wantIDs(t testing.TB, what string, got []string, want ...string) {
	t.Helper()
	if len(want) == 0 {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}
