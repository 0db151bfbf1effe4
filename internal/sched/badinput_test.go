package sched

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Bad input returns a clear error (errors.Is the documented error, and a
// message that names the offending thing) and leaves the state unchanged.

// frozenState is everything a driver can observe of the core, plus each
// job's state and attempt, so that two of them compare with DeepEqual.
type frozenState struct {
	Snapshot     Snapshot
	Estimates    map[string][]Estimate
	NextDeadline time.Time
	Tiers        []Tier
	TierLimits   []int
	Jobs         map[string]string
}

func freezeState(h *harness) frozenState {
	h.t.Helper()
	f := frozenState{Snapshot: h.s.Snapshot(), Estimates: map[string][]Estimate{},
		NextDeadline: h.s.NextDeadline(), Tiers: h.s.Tiers(), TierLimits: h.s.TierLimits(), Jobs: map[string]string{}}
	for _, q := range f.Snapshot.Queues {
		est, err := h.s.Estimates(q.Name, 1000)
		if err != nil {
			h.t.Fatalf("Estimates(%s): %v", q.Name, err)
		}
		f.Estimates[q.Name] = est
	}
	for id, j := range h.s.jobs.all() {
		f.Jobs[id] = fmt.Sprintf("state %d attempt %d", j.state, j.attempt)
	}
	return f
}

// badHarness builds a scheduler with work in every state: "run" running on
// the leased agent, "queued" blocked by its key, "wait" waiting for "run",
// "retry" delayed by its backoff. The clock then moves on by a second, so
// that a lease renewed by mistake would show in NextDeadline.
func badHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, threeTiers(2, 1), 1)
	h.queue(QueueSpec{Name: "asy", Priority: 1})
	h.queue(QueueSpec{Name: "scan", Priority: 2, Order: OrderRandom, Batch: 2,
		Retry: RetryPolicy{MaxAttempts: 2, Backoff: time.Minute}})
	h.worker(WorkerSpec{ID: "agent", Slots: 3, LeaseTTL: 30 * time.Second})
	sqSetLimit(t, h, "net:*", 1)
	h.submit(JobSpec{ID: "retry", Queue: "scan"}, JobSpec{ID: "run", Queue: "scan", Keys: []string{"net:a"}})
	pulled := h.pull("agent", 2) // from a random queue: in either order
	slices.Sort(pulled)
	wantIDs(t, "agent pulls", pulled, "retry", "run")
	h.complete("retry", FailedAttempt)
	h.submit(JobSpec{ID: "queued", Queue: "scan", Keys: []string{"net:a"}},
		JobSpec{ID: "wait", Queue: "asy", Tier: slow, After: []string{"run"}})
	h.clk.advance(time.Second)
	h.s.Events()
	return h
}

// badCase is one bad call, the error it must return and the words its
// message must hold.
type badCase struct {
	name  string
	call  func(s *Scheduler) error
	want  error
	names []string
}

func TestBadInputReturnsClearErrorAndLeavesStateUnchanged(t *testing.T) {
	var cases []badCase
	for _, group := range [][]badCase{badTierCases, badQueueCases, badDuplicateCases,
		badDependencyCases, badCycleCases, badBatchCases} {
		cases = append(cases, group...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := badHarness(t)
			before := freezeState(h)
			err := c.call(h.s)
			wantClearError(t, err, c.want, c.names...)
			h.check()
			if after := freezeState(h); !reflect.DeepEqual(before, after) {
				t.Fatalf("state changed:\nbefore %+v\nafter  %+v", before, after)
			}
			if evs := h.s.Events(); len(evs) != 0 {
				t.Fatalf("refused call emitted %+v", evs)
			}
		})
	}
}

// wantClearError checks errors.Is and that the message names each word.
func wantClearError(t *testing.T, err, target error, names ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("error %q does not name %q", err, n)
		}
	}
}

func badSubmit(specs ...JobSpec) func(s *Scheduler) error {
	return func(s *Scheduler) error { return s.SubmitWorkflow(specs, nil) }
}

func badSubmitOne(spec JobSpec) func(s *Scheduler) error {
	return func(s *Scheduler) error { return s.Submit(spec) }
}

func badWorkflow(specs []JobSpec, edges ...Edge) func(s *Scheduler) error {
	return func(s *Scheduler) error { return s.SubmitWorkflow(specs, edges) }
}

func badTierLimits(limits ...int) func(s *Scheduler) error {
	return func(s *Scheduler) error { return s.SetTierLimits(limits) }
}

var badTierCases = []badCase{
	{"tier limits increase", badTierLimits(0, 1, 2), ErrInvalidTiers, []string{"slow", "limit 2"}},
	{"medium tier limit below 1", badTierLimits(0, 0, 1), ErrInvalidTiers, []string{"medium"}},
	{"slow tier limit below 1", badTierLimits(0, 2, 0), ErrInvalidTiers, []string{"slow"}},
	{"negative tier limit", badTierLimits(0, -1, -1), ErrInvalidTiers, []string{"medium", "-1"}},
	{"too few tier limits", badTierLimits(0, 1), ErrInvalidTiers, []string{"2 limits for 3 tiers"}},
}

var badQueueCases = []badCase{
	{"submit to unknown queue", badSubmitOne(JobSpec{ID: "j", Queue: "nope"}), ErrUnknownQueue, []string{`"nope"`, `"j"`}},
	{"workflow with one job in unknown queue",
		badSubmit(JobSpec{ID: "ok", Queue: "asy"}, JobSpec{ID: "lost", Queue: "nope", After: []string{"ok"}}),
		ErrUnknownQueue, []string{`"nope"`, `"lost"`}},
	{"remove unknown queue", func(s *Scheduler) error { return s.RemoveQueue("nope") }, ErrUnknownQueue, []string{`"nope"`}},
	{"estimates of unknown queue", func(s *Scheduler) error { _, err := s.Estimates("nope", 5); return err },
		ErrUnknownQueue, []string{`"nope"`}},
	{"interactive task in unknown queue", func(s *Scheduler) error {
		_, err := s.StartInteractive(JobSpec{ID: "i", Queue: "nope"})
		return err
	}, ErrUnknownQueue, []string{`"nope"`}},
}

var badDuplicateCases = []badCase{
	{"duplicate of a running job", badSubmitOne(JobSpec{ID: "run", Queue: "asy"}), ErrDuplicateJob, []string{`"run"`}},
	{"duplicate of a queued job", badSubmitOne(JobSpec{ID: "queued", Queue: "scan"}), ErrDuplicateJob, []string{`"queued"`}},
	{"duplicate of a waiting job", badSubmitOne(JobSpec{ID: "wait", Queue: "asy"}), ErrDuplicateJob, []string{`"wait"`}},
	{"duplicate of a delayed job", badSubmitOne(JobSpec{ID: "retry", Queue: "asy"}), ErrDuplicateJob, []string{`"retry"`}},
	{"duplicate inside one workflow",
		badSubmit(JobSpec{ID: "x", Queue: "asy"}, JobSpec{ID: "y", Queue: "asy"}, JobSpec{ID: "x", Queue: "scan"}),
		ErrDuplicateJob, []string{`"x"`}},
	{"workflow reusing a known id", badSubmit(JobSpec{ID: "new", Queue: "asy"}, JobSpec{ID: "run", Queue: "asy"}),
		ErrDuplicateJob, []string{`"run"`}},
	{"interactive task reusing a known id", func(s *Scheduler) error {
		_, err := s.StartInteractive(JobSpec{ID: "queued", Queue: "asy"})
		return err
	}, ErrDuplicateJob, []string{`"queued"`}},
}

var badDependencyCases = []badCase{
	{"unknown dependency", badSubmitOne(JobSpec{ID: "j", Queue: "asy", After: []string{"ghost"}}),
		ErrUnknownDependency, []string{`"ghost"`, `"j"`}},
	{"unknown dependency after a known one", badSubmitOne(JobSpec{ID: "j", Queue: "asy", After: []string{"run", "ghost"}}),
		ErrUnknownDependency, []string{`"ghost"`}},
	{"edge from unknown job", badWorkflow([]JobSpec{{ID: "a", Queue: "asy"}}, Edge{From: "ghost", To: "a"}),
		ErrUnknownDependency, []string{`"ghost"`, `"a"`}},
	{"edge to unknown job", badWorkflow([]JobSpec{{ID: "a", Queue: "asy"}}, Edge{From: "a", To: "ghost"}),
		ErrUnknownJob, []string{`"ghost"`}},
}

var badCycleCases = []badCase{
	{"self dependency", badSubmitOne(JobSpec{ID: "self", Queue: "asy", After: []string{"self"}}),
		ErrCycle, []string{`"self"`}},
	{"self edge", badWorkflow([]JobSpec{{ID: "self", Queue: "asy"}}, Edge{From: "self", To: "self"}),
		ErrCycle, []string{`"self"`}},
	{"two-job cycle", badSubmit(JobSpec{ID: "a", Queue: "asy", After: []string{"b"}}, JobSpec{ID: "b", Queue: "asy", After: []string{"a"}}),
		ErrCycle, nil},
	{"three-job cycle by edges behind a known job", badWorkflow(
		[]JobSpec{{ID: "a", Queue: "asy", After: []string{"run"}}, {ID: "b", Queue: "scan"}, {ID: "c", Queue: "asy"}},
		Edge{From: "a", To: "b"}, Edge{From: "b", To: "c"}, Edge{From: "c", To: "a"}),
		ErrCycle, nil},
}

var badBatchCases = []badCase{
	{"pull a negative batch", func(s *Scheduler) error { _, err := s.Pull("agent", -1); return err },
		ErrInvalidBatch, []string{"-1"}},
	{"pull by an unknown worker", func(s *Scheduler) error { _, err := s.Pull("ghost", 1); return err },
		ErrUnknownWorker, []string{`"ghost"`}},
	{"new queue with a negative batch", func(s *Scheduler) error {
		return s.DefineQueue(QueueSpec{Name: "neg", Batch: -1})
	}, ErrInvalidBatch, []string{`"neg"`, "-1"}},
	{"redefine a queue with a negative batch", func(s *Scheduler) error {
		return s.DefineQueue(QueueSpec{Name: "scan", Priority: 9, Order: OrderStrict, Paused: true, Batch: -1})
	}, ErrInvalidBatch, []string{`"scan"`, "-1"}},
	{"estimates with a negative count", func(s *Scheduler) error { _, err := s.Estimates("scan", -1); return err },
		ErrInvalidBatch, []string{"-1"}},
}

func TestCycleErrorNamesAJobOnTheCycle(t *testing.T) {
	h := badHarness(t)
	specs := []JobSpec{{ID: "up", Queue: "asy"}, {ID: "a", Queue: "asy", After: []string{"up", "c"}},
		{ID: "b", Queue: "asy", After: []string{"a"}}, {ID: "c", Queue: "asy", After: []string{"b"}}}
	err := h.s.SubmitWorkflow(specs, nil)
	var ce *CycleError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want a *CycleError", err)
	}
	if !strings.Contains("abc", ce.Job) || !strings.Contains(err.Error(), `"`+ce.Job+`"`) {
		t.Fatalf("cycle error %q names %q, want one of a, b, c", err, ce.Job)
	}
	if len(ce.Cycle) != 3 {
		t.Fatalf("cycle %v, want the three jobs a, b, c", ce.Cycle)
	}
}

func TestInvalidTiersAreRefusedByNew(t *testing.T) {
	cases := []struct {
		name  string
		tiers []Tier
		names []string
	}{
		{"limits increase", threeTiers(1, 2), []string{"slow", "limit 2"}},
		{"medium limit below 1", threeTiers(-1, -1), []string{"medium", "-1"}},
		{"slow limit below 1", threeTiers(2, -3), []string{"slow", "-3"}},
		{"no limit at all", threeTiers(0, 0), []string{"medium"}},
		{"shares increase", []Tier{{Name: "fast", Duration: time.Second},
			{Name: "medium", Duration: 2 * time.Second, Share: 0.25}, {Name: "slow", Duration: 3 * time.Second, Share: 0.5}},
			[]string{"slow", "0.5"}},
		{"share above 1", []Tier{{Name: "fast", Duration: time.Second}, {Name: "big", Duration: 2 * time.Second, Share: 1.5}},
			[]string{"big", "1.5"}},
		{"limit on the fastest tier", []Tier{{Name: "fast", Duration: time.Second, Limit: 3}}, []string{"fast"}},
		{"durations do not increase", []Tier{{Name: "fast", Duration: 2 * time.Second},
			{Name: "slower", Duration: time.Second, Limit: 1}}, []string{"slower"}},
		{"too many tiers", make([]Tier, MaxTiers+1), []string{fmt.Sprint(MaxTiers + 1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Config{Tiers: c.tiers, Now: newClock().Now})
			if s != nil {
				t.Fatalf("New returned a scheduler for invalid tiers")
			}
			wantClearError(t, err, ErrInvalidTiers, c.names...)
		})
	}
}

func TestEqualTierLimitsAreAccepted(t *testing.T) {
	h := newHarness(t, threeTiers(2, 2), 1)
	if err := h.s.SetTierLimits([]int{0, 3, 3}); err != nil {
		t.Fatalf("SetTierLimits(3, 3): %v; equal limits do not increase", err)
	}
	h.backends(4)
	if got := h.s.TierLimits(); got[1] != 3 || got[2] != 3 {
		t.Fatalf("tier limits %v, want medium 3 and slow 3", got)
	}
}
