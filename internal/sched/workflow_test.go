package sched

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Workflows (docs/design.md, "Workflows"): a job starts once every upstream job
// succeeded; a cycle is refused; a failure past the retries cancels the
// dependants (or lets those that ask run anyway); a retried job goes behind
// ready jobs. The queue "wf" is fifo and its jobs are fast, so only
// dependencies decide.

func wfHarness(t *testing.T, slots int, retry RetryPolicy) *harness {
	t.Helper()
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "wf", Retry: retry})
	h.backends(slots)
	return h
}

func wfJob(id string, after ...string) JobSpec {
	return JobSpec{ID: id, Queue: "wf", After: after}
}

func wfAnyway(id string, after ...string) JobSpec {
	sp := wfJob(id, after...)
	sp.RunAfterFailure = true
	return sp
}

// wfSubmit submits a workflow and fails the test on an error.
func (h *harness) wfSubmit(specs []JobSpec, edges ...Edge) {
	h.t.Helper()
	if err := h.s.SubmitWorkflow(specs, edges); err != nil {
		h.t.Fatalf("SubmitWorkflow: %v", err)
	}
	h.check()
}

// wfSucceed reports the given running jobs as succeeded, in order.
func (h *harness) wfSucceed(ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		h.complete(id, Succeeded)
	}
}

// wfWantIdle checks that every job is gone and every counter is zero.
func (h *harness) wfWantIdle() {
	h.t.Helper()
	if err := h.s.Idle(); err != nil {
		h.t.Fatalf("not idle: %v", err)
	}
}

// wantEventIDs checks the job ids of events, in any order.
func wantEventIDs(t *testing.T, what string, evs []Event, want ...string) {
	t.Helper()
	var got []string
	for _, e := range evs {
		got = append(got, e.JobID)
	}
	slices.Sort(got)
	slices.Sort(want)
	wantIDs(t, what, got, want...)
}

func TestEmptyWorkflowCompletesAtOnce(t *testing.T) {
	h := wfHarness(t, 2, RetryPolicy{})
	before := h.s.Snapshot()
	h.wfSubmit(nil)
	h.wfSubmit([]JobSpec{}, []Edge{}...)
	if after := h.s.Snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("empty workflow changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
	wantIDs(t, "started", h.dispatch())
	if evs := h.s.Events(); len(evs) != 0 {
		t.Fatalf("events %+v, want none", evs)
	}
	h.wfWantIdle()
}

func TestSingleJobWorkflow(t *testing.T) {
	h := wfHarness(t, 2, RetryPolicy{})
	h.wfSubmit([]JobSpec{wfJob("a")})
	wantIDs(t, "started", h.dispatch(), "a")
	h.complete("a", Succeeded)
	h.wfWantIdle()
}

func TestLinearWorkflowRunsInOrder(t *testing.T) {
	cases := []struct {
		name  string
		specs []JobSpec
		edges []Edge
	}{
		{"edge", []JobSpec{wfJob("b"), wfJob("a")}, []Edge{{"a", "b"}}},
		{"after", []JobSpec{wfJob("b", "a"), wfJob("a")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := wfHarness(t, 2, RetryPolicy{})
			h.wfSubmit(c.specs, c.edges...)
			wantIDs(t, "first", h.dispatch(), "a")
			if h.state("b") != stateWaiting {
				t.Fatalf("b state %d, want waiting", h.state("b"))
			}
			h.complete("a", Succeeded)
			wantIDs(t, "after a", h.dispatch(), "b")
			h.complete("b", Succeeded)
			h.wfWantIdle()
		})
	}
}

// a→{b,c}→d: b and c run in parallel; d only after both succeeded, whichever
// ends first.
func TestDiamondWorkflow(t *testing.T) {
	for _, last := range []string{"b", "c"} {
		t.Run(last+" ends last", func(t *testing.T) {
			h := wfHarness(t, 4, RetryPolicy{})
			h.wfSubmit([]JobSpec{wfJob("a"), wfJob("b"), wfJob("c"), wfJob("d")},
				Edge{"a", "b"}, Edge{"a", "c"}, Edge{"b", "d"}, Edge{"c", "d"})
			wantIDs(t, "first", h.dispatch(), "a")
			h.complete("a", Succeeded)
			wantIDs(t, "after a, in parallel", h.dispatch(), "b", "c")
			first := map[string]string{"b": "c", "c": "b"}[last]
			h.complete(first, Succeeded)
			wantIDs(t, "after "+first+" only", h.dispatch())
			h.complete(last, Succeeded)
			wantIDs(t, "after both", h.dispatch(), "d")
			h.complete("d", Succeeded)
			h.wfWantIdle()
		})
	}
}

// wfGraph is a workflow with a failing job: f fails (no retries), so its
// plain dependants are cancelled and r, which runs after failures, runs.
//
//	a → b → d → g
//	a → c → d
//	c → f → x → y
//	f → r → z ;  b → r
//	e (alone)
var wfGraph = struct {
	jobs  []string
	edges []Edge
	fails map[string]bool
	// anyway run after failures.
	anyway map[string]bool
}{
	jobs: []string{"a", "b", "c", "d", "e", "f", "g", "r", "x", "y", "z"},
	edges: []Edge{{"a", "b"}, {"a", "c"}, {"b", "d"}, {"c", "d"}, {"d", "g"}, {"c", "f"},
		{"f", "x"}, {"x", "y"}, {"f", "r"}, {"b", "r"}, {"r", "z"}},
	fails:  map[string]bool{"f": true},
	anyway: map[string]bool{"r": true},
}

// wfOutcome is what running a workflow to its end gives: the waves of jobs
// started together (each sorted), and the jobs cancelled.
type wfOutcome struct {
	waves     [][]string
	cancelled []string
}

// runWorkflow submits the given specs and edges with as many slots as jobs,
// then repeatedly starts what is ready and completes all of it.
func runWorkflow(t *testing.T, specs []JobSpec, edges []Edge, fails map[string]bool) wfOutcome {
	t.Helper()
	h := wfHarness(t, len(specs), RetryPolicy{})
	h.wfSubmit(specs, edges...)
	var out wfOutcome
	for {
		wave := h.dispatch()
		if len(wave) == 0 {
			break
		}
		slices.Sort(wave)
		out.waves = append(out.waves, wave)
		for _, id := range wave {
			outcome := Succeeded
			if fails[id] {
				outcome = FailedAttempt
			}
			h.complete(id, outcome)
		}
		for _, e := range h.events(EventCancelled) {
			out.cancelled = append(out.cancelled, e.JobID)
		}
	}
	slices.Sort(out.cancelled)
	h.wfWantIdle()
	return out
}

// wfGraphSpecs builds the specs of wfGraph in the given job order, giving
// the edges into the jobs of viaAfter as After lists and the others as
// edges.
func wfGraphSpecs(order []string, edges []Edge, viaAfter map[string]bool) ([]JobSpec, []Edge) {
	specs := make([]JobSpec, 0, len(order))
	at := map[string]int{}
	for _, id := range order {
		sp := wfJob(id)
		sp.RunAfterFailure = wfGraph.anyway[id]
		at[id] = len(specs)
		specs = append(specs, sp)
	}
	var rest []Edge
	for _, e := range edges {
		if viaAfter[e.To] {
			specs[at[e.To]].After = append(specs[at[e.To]].After, e.From)
		} else {
			rest = append(rest, e)
		}
	}
	return specs, rest
}

func TestWorkflowResultIndependentOfSubmissionOrder(t *testing.T) {
	want := wfOutcome{
		waves:     [][]string{{"a", "e"}, {"b", "c"}, {"d", "f"}, {"g", "r"}, {"z"}},
		cancelled: []string{"x", "y"},
	}
	specs, edges := wfGraphSpecs(wfGraph.jobs, wfGraph.edges, nil)
	if got := runWorkflow(t, specs, edges, wfGraph.fails); !reflect.DeepEqual(got, want) {
		t.Fatalf("given order: %+v, want %+v", got, want)
	}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		order := slices.Clone(wfGraph.jobs)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		shuffled := slices.Clone(wfGraph.edges)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		viaAfter := map[string]bool{}
		for _, id := range order {
			viaAfter[id] = rng.IntN(2) == 0
		}
		specs, edges := wfGraphSpecs(order, shuffled, viaAfter)
		if got := runWorkflow(t, specs, edges, wfGraph.fails); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d (jobs %v, edges %v, via After %v): %+v, want %+v",
				seed, order, shuffled, viaAfter, got, want)
		}
	}
}

func TestDuplicateEdgesCountOnce(t *testing.T) {
	cases := []struct {
		name  string
		specs []JobSpec
		edges []Edge
	}{
		{"edge twice", []JobSpec{wfJob("a"), wfJob("b")}, []Edge{{"a", "b"}, {"a", "b"}}},
		{"after twice", []JobSpec{wfJob("a"), wfJob("b", "a", "a")}, nil},
		{"after and edge", []JobSpec{wfJob("a"), wfJob("b", "a")}, []Edge{{"a", "b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := wfHarness(t, 2, RetryPolicy{})
			h.wfSubmit(c.specs, c.edges...)
			wantIDs(t, "first", h.dispatch(), "a")
			h.complete("a", Succeeded)
			wantIDs(t, "after a's single success", h.dispatch(), "b")
			h.complete("b", Succeeded)
			h.wfWantIdle()
		})
	}
}

func TestCycleRefusedAtSubmission(t *testing.T) {
	cases := []struct {
		name    string
		specs   []JobSpec
		edges   []Edge
		onCycle []string
	}{
		{"self edge", []JobSpec{wfJob("a")}, []Edge{{"a", "a"}}, []string{"a"}},
		{"self after", []JobSpec{wfJob("a", "a")}, nil, []string{"a"}},
		{"two jobs", []JobSpec{wfJob("a"), wfJob("b")}, []Edge{{"a", "b"}, {"b", "a"}}, []string{"a", "b"}},
		{"three jobs via after", []JobSpec{wfJob("a", "c"), wfJob("b", "a"), wfJob("c", "b")}, nil, []string{"a", "b", "c"}},
		{"cycle below a fine part", []JobSpec{wfJob("x"), wfJob("y", "x"), wfJob("a", "y"), wfJob("b", "a"), wfJob("c", "b")},
			[]Edge{{"c", "a"}, {"x", "c"}}, []string{"a", "b", "c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := wfHarness(t, 2, RetryPolicy{})
			h.submit(wfJob("live"))
			wantIDs(t, "live", h.dispatch(), "live")
			h.submit(wfJob("queued"), wfJob("waiting", "live"))
			before := h.s.Snapshot()
			err := h.s.SubmitWorkflow(c.specs, c.edges)
			h.check()
			var ce *CycleError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCycle) {
				t.Fatalf("error %v, want a *CycleError", err)
			}
			if !slices.Contains(c.onCycle, ce.Job) {
				t.Fatalf("error names %q, not on the cycle %v", ce.Job, c.onCycle)
			}
			for _, id := range ce.Cycle {
				if !slices.Contains(c.onCycle, id) {
					t.Fatalf("reported cycle %v holds %q, not on the cycle %v", ce.Cycle, id, c.onCycle)
				}
			}
			if after := h.s.Snapshot(); !reflect.DeepEqual(before, after) {
				t.Fatalf("refused workflow changed the state:\nbefore %+v\nafter  %+v", before, after)
			}
			for _, sp := range c.specs {
				if h.state(sp.ID) != stateDone {
					t.Fatalf("job %q of the refused workflow is known", sp.ID)
				}
			}
		})
	}
}

func TestSubmitWithSelfDependencyRefusedAsCycle(t *testing.T) {
	h := wfHarness(t, 1, RetryPolicy{})
	before := h.s.Snapshot()
	err := h.s.Submit(wfJob("a", "a"))
	var ce *CycleError
	if !errors.As(err, &ce) || ce.Job != "a" {
		t.Fatalf("error %v, want a *CycleError naming a", err)
	}
	if after := h.s.Snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
	h.submit(wfJob("a")) // the id is still free
}

// a → b → c, a → d, e independent. a fails past its retries: b, c and d
// are cancelled, each with one EventCancelled; e is untouched.
func TestFailurePastRetriesCancelsDependantsTransitively(t *testing.T) {
	h := wfHarness(t, 4, RetryPolicy{MaxAttempts: 2})
	h.wfSubmit([]JobSpec{wfJob("a"), wfJob("b", "a"), wfJob("c", "b"), wfJob("d", "a"), wfJob("e")})
	wantIDs(t, "first", h.dispatch(), "a", "e")
	if ack := h.complete("a", FailedAttempt); !ack.Retrying {
		t.Fatalf("first failure: %+v, want a retry", ack)
	}
	if evs := h.events(EventCancelled); len(evs) != 0 {
		t.Fatalf("cancelled %+v after a failure with retries left", evs)
	}
	wantIDs(t, "retry", h.dispatch(), "a")
	if ack := h.complete("a", FailedAttempt); ack.Retrying {
		t.Fatalf("second failure: %+v, want no retry", ack)
	}
	wantEventIDs(t, "cancelled", h.events(EventCancelled), "b", "c", "d")
	for _, id := range []string{"b", "c", "d"} {
		if h.state(id) != stateDone {
			t.Fatalf("%s still known", id)
		}
	}
	wantIDs(t, "after the failure", h.dispatch())
	if got := h.s.Counters().Cancelled; got != 3 {
		t.Fatalf("cancelled counter %d, want 3", got)
	}
	h.complete("e", Succeeded)
	h.wfWantIdle()
}

func TestFailureCancelsDependantsOfLiveJobFromSubmit(t *testing.T) {
	h := wfHarness(t, 2, RetryPolicy{})
	h.submit(wfJob("a"))
	h.submit(wfJob("b", "a"))
	h.wfSubmit([]JobSpec{wfJob("c")}, Edge{"a", "c"})
	wantIDs(t, "first", h.dispatch(), "a")
	h.complete("a", FailedAttempt)
	wantEventIDs(t, "cancelled", h.events(EventCancelled), "b", "c")
	h.wfWantIdle()
}

// RunAfterFailure jobs run once all their dependencies finished, whatever
// the outcome; a plain job behind them waits for their own success.
func TestRunAfterFailureDependantsRunAnyway(t *testing.T) {
	// a fails; k succeeds later. r (anyway) waits for both; m is cancelled;
	// s (anyway, behind the cancelled m) runs; z waits for r's success.
	h := wfHarness(t, 4, RetryPolicy{})
	h.wfSubmit([]JobSpec{wfJob("a"), wfJob("k"), wfAnyway("r", "a", "k"), wfJob("m", "a"),
		wfAnyway("s", "m"), wfJob("z", "r")})
	wantIDs(t, "first", h.dispatch(), "a", "k")
	h.complete("a", FailedAttempt)
	wantEventIDs(t, "cancelled", h.events(EventCancelled), "m")
	wantIDs(t, "after a failed", h.dispatch(), "s")
	if h.state("r") != stateWaiting {
		t.Fatalf("r state %d, want waiting for k", h.state("r"))
	}
	h.complete("k", Succeeded)
	wantIDs(t, "after k", h.dispatch(), "r")
	h.complete("r", Succeeded)
	wantIDs(t, "after r", h.dispatch(), "z")
	h.wfSucceed("s", "z")
	h.wfWantIdle()
}

// x fails its first attempt (retries left, no backoff) while y and z are
// queued: x goes behind them. The policy may come from the queue or the job.
func TestRetriedJobGoesBehindReadyJobs(t *testing.T) {
	twice := RetryPolicy{MaxAttempts: 2}
	cases := []struct {
		name     string
		queue    RetryPolicy
		jobRetry *RetryPolicy
	}{
		{"queue policy", twice, nil},
		{"job policy", RetryPolicy{}, &twice},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := wfHarness(t, 1, c.queue)
			x := wfJob("x")
			x.Retry = c.jobRetry
			h.submit(x, wfJob("y"), wfJob("z"))
			wantIDs(t, "first", h.dispatch(), "x")
			ack := h.complete("x", FailedAttempt)
			if !ack.Retrying || !ack.RetryAt.Equal(h.clk.Now()) {
				t.Fatalf("ack %+v, want a retry now", ack)
			}
			var starts []string
			for range 3 {
				started := h.dispatch()
				starts = append(starts, started...)
				for _, id := range started {
					h.complete(id, Succeeded)
				}
			}
			wantIDs(t, "starts after x failed", starts, "y", "z", "x")
			h.wfWantIdle()
		})
	}
}

// A retried workflow job goes behind jobs that became ready before its
// failure, and its dependants still wait for its success.
func TestRetriedWorkflowJobGoesBehindReadyJobs(t *testing.T) {
	h := wfHarness(t, 1, RetryPolicy{MaxAttempts: 2})
	h.wfSubmit([]JobSpec{wfJob("x"), wfJob("y"), wfJob("z"), wfJob("w", "x")})
	wantIDs(t, "first", h.dispatch(), "x")
	h.complete("x", FailedAttempt)
	for _, id := range []string{"y", "z", "x", "w"} {
		wantIDs(t, "next", h.dispatch(), id)
		h.complete(id, Succeeded)
	}
	h.wfWantIdle()
}

func TestUnknownDependencyRefused(t *testing.T) {
	cases := []struct {
		name   string
		submit func(s *Scheduler) error
	}{
		{"submit after", func(s *Scheduler) error { return s.Submit(wfJob("n", "ghost")) }},
		{"workflow after", func(s *Scheduler) error {
			return s.SubmitWorkflow([]JobSpec{wfJob("n"), wfJob("m", "n", "ghost")}, nil)
		}},
		{"workflow edge", func(s *Scheduler) error {
			return s.SubmitWorkflow([]JobSpec{wfJob("n"), wfJob("m")}, []Edge{{"n", "m"}, {"ghost", "m"}})
		}},
		{"finished job", func(s *Scheduler) error { return s.Submit(wfJob("n", "done")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := wfHarness(t, 2, RetryPolicy{})
			h.submit(wfJob("done"), wfJob("live"))
			wantIDs(t, "started", h.dispatch(), "done", "live")
			h.complete("done", Succeeded)
			h.submit(wfJob("queued"), wfJob("waiting", "live"))
			before := h.s.Snapshot()
			err := c.submit(h.s)
			h.check()
			wantErr(t, err, ErrUnknownDependency)
			if after := h.s.Snapshot(); !reflect.DeepEqual(before, after) {
				t.Fatalf("refused submission changed the state:\nbefore %+v\nafter  %+v", before, after)
			}
			if h.state("n") != stateDone || h.state("m") != stateDone {
				t.Fatal("a job of the refused submission is known")
			}
		})
	}
}

// A dependency on a job submitted earlier with Submit and still live works,
// whether that job is queued or already running.
func TestDependencyOnLiveJobSubmittedEarlier(t *testing.T) {
	for _, running := range []bool{false, true} {
		t.Run(fmt.Sprintf("running=%v", running), func(t *testing.T) {
			h := wfHarness(t, 3, RetryPolicy{})
			h.submit(wfJob("a"))
			if running {
				wantIDs(t, "a", h.dispatch(), "a")
			}
			h.wfSubmit([]JobSpec{wfJob("b"), wfJob("c", "b")}, Edge{"a", "b"})
			h.submit(wfJob("d", "a"))
			if !running {
				wantIDs(t, "a", h.dispatch(), "a")
			}
			wantIDs(t, "while a runs", h.dispatch())
			h.complete("a", Succeeded)
			wantIDs(t, "after a", h.dispatch(), "b", "d")
			h.complete("b", Succeeded)
			wantIDs(t, "after b", h.dispatch(), "c")
			h.wfSucceed("c", "d")
			h.wfWantIdle()
		})
	}
}
