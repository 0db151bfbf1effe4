package sched

import (
	"testing"
	"time"
)

// schedHarness has one queue with retries and one pull worker whose lease
// never lapses, so that NextDeadline only reflects scheduled jobs,
// retries and deadlines.
func schedHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "q", Retry: RetryPolicy{MaxAttempts: 3, Backoff: time.Second}})
	h.worker(WorkerSpec{ID: "agent", Slots: 4})
	return h
}

func (h *harness) wantNext(want time.Time) {
	h.t.Helper()
	if got := h.s.NextDeadline(); !got.Equal(want) {
		h.t.Fatalf("NextDeadline = %v; want %v", got, want)
	}
}

func (h *harness) tickTo(at time.Time) {
	h.t.Helper()
	h.clk.t = at
	h.s.Tick()
	h.check()
}

// A scheduled job is ready exactly at its time, after one Tick at
// NextDeadline, which is the earliest due time: no polling.
func TestScheduledJobReadyExactlyWhenDue(t *testing.T) {
	h := schedHarness(t)
	t0 := h.clk.Now()
	h.submit(JobSpec{ID: "late", Queue: "q", NotBefore: t0.Add(10 * time.Second)},
		JobSpec{ID: "early", Queue: "q", NotBefore: t0.Add(5 * time.Second)},
		JobSpec{ID: "past", Queue: "q", NotBefore: t0.Add(-time.Hour)})
	wantIDs(t, "pull at once", h.pull("agent", 4), "past")
	h.wantNext(t0.Add(5 * time.Second))
	h.tickTo(t0.Add(5*time.Second - time.Nanosecond))
	if st := h.state("early"); st != stateDelayed {
		t.Fatalf("early is %v a nanosecond before its time; want delayed", st)
	}
	h.tickTo(t0.Add(5 * time.Second))
	wantIDs(t, "pull when due", h.pull("agent", 4), "early")
	h.wantNext(t0.Add(10 * time.Second))
	h.tickTo(t0.Add(10 * time.Second))
	wantIDs(t, "pull when the second is due", h.pull("agent", 4), "late")
	h.wantNext(time.Time{})
}

// A job with dependencies and a due time waits for both: the due time
// applies once the dependencies are done.
func TestScheduledJobAfterDependencies(t *testing.T) {
	for _, tc := range []struct {
		name      string
		doneAfter time.Duration // when the dependency succeeds
		readyAt   time.Duration // when the job is ready
	}{
		{"dependency done before the due time", 2 * time.Second, 10 * time.Second},
		{"dependency done after the due time", 15 * time.Second, 15 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := schedHarness(t)
			t0 := h.clk.Now()
			if err := h.s.SubmitWorkflow([]JobSpec{{ID: "a", Queue: "q"},
				{ID: "b", Queue: "q", After: []string{"a"}, NotBefore: t0.Add(10 * time.Second)}}, nil); err != nil {
				t.Fatal(err)
			}
			h.check()
			wantIDs(t, "first pull", h.pull("agent", 4), "a")
			h.clk.t = t0.Add(tc.doneAfter)
			h.complete("a", Succeeded)
			if tc.readyAt > tc.doneAfter {
				if st := h.state("b"); st != stateDelayed {
					t.Fatalf("b is %v; want delayed until its time", st)
				}
				h.wantNext(t0.Add(tc.readyAt))
				h.tickTo(t0.Add(tc.readyAt))
			}
			wantIDs(t, "pull when due", h.pull("agent", 4), "b")
		})
	}
}

// A job not started by its deadline is cancelled exactly then
// (EventExpired), with its dependants, except one that runs after
// failures; the deadline wakes the driver through NextDeadline.
func TestDeadlineCancelsUnstartedJob(t *testing.T) {
	h := schedHarness(t)
	t0 := h.clk.Now()
	if err := h.s.SubmitWorkflow([]JobSpec{
		{ID: "x", Queue: "q", NotBefore: t0.Add(10 * time.Second), Deadline: t0.Add(20 * time.Second)},
		{ID: "dep", Queue: "q", After: []string{"x"}},
		{ID: "anyway", Queue: "q", After: []string{"x"}, RunAfterFailure: true},
		{ID: "w", Queue: "q", After: []string{"x"}, Deadline: t0.Add(5 * time.Second)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	h.check()
	h.wantNext(t0.Add(5 * time.Second))
	h.tickTo(t0.Add(5 * time.Second))
	if ev := h.events(EventExpired); len(ev) != 1 || ev[0].JobID != "w" {
		t.Fatalf("expired at 5 s: %+v; want the waiting job w", ev)
	}
	h.wantNext(t0.Add(10 * time.Second))
	h.tickTo(t0.Add(10 * time.Second)) // x is due, but nobody pulls
	h.wantNext(t0.Add(20 * time.Second))
	h.tickTo(t0.Add(20 * time.Second))
	evs := h.s.Events()
	var expired, cancelled []string
	for _, e := range evs {
		switch e.Kind {
		case EventExpired:
			expired = append(expired, e.JobID)
		case EventCancelled:
			cancelled = append(cancelled, e.JobID)
		}
	}
	wantIDs(t, "expired", expired, "x")
	wantIDs(t, "cancelled dependants", cancelled, "dep")
	wantIDs(t, "pull", h.pull("agent", 4), "anyway")
	if c := h.s.Counters(); c.Expired != 2 {
		t.Fatalf("Expired = %d; want 2", c.Expired)
	}
	h.complete("anyway", Succeeded)
	if err := h.s.Idle(); err != nil {
		t.Fatal(err)
	}
}

// Pull starts nothing past its deadline, even before Tick ran.
func TestPullStartsNothingPastDeadline(t *testing.T) {
	h := schedHarness(t)
	t0 := h.clk.Now()
	h.submit(JobSpec{ID: "x", Queue: "q", Deadline: t0.Add(time.Second)}, JobSpec{ID: "y", Queue: "q"})
	h.clk.t = t0.Add(time.Second)
	wantIDs(t, "pull", h.pull("agent", 4), "y")
	if ev := h.events(EventExpired); len(ev) != 1 || ev[0].JobID != "x" {
		t.Fatalf("events %+v; want x expired", ev)
	}
}

// Once a job started, its deadline no longer applies: a retry waiting out
// its backoff past the deadline runs.
func TestDeadlineEndsAtFirstStart(t *testing.T) {
	h := schedHarness(t)
	t0 := h.clk.Now()
	h.submit(JobSpec{ID: "x", Queue: "q", Deadline: t0.Add(time.Second)})
	wantIDs(t, "pull", h.pull("agent", 1), "x")
	h.wantNext(time.Time{})
	h.clk.t = t0.Add(900 * time.Millisecond)
	if ack := h.complete("x", FailedAttempt); !ack.Retrying {
		t.Fatal("no retry")
	}
	h.tickTo(t0.Add(1900 * time.Millisecond))
	wantIDs(t, "retry", h.pull("agent", 1), "x")
	if ev := h.events(EventExpired); len(ev) != 0 {
		t.Fatalf("events %+v; want none expired", ev)
	}
}

// RunNow readies a scheduled job or a delayed retry at once; anything else
// is refused. Cancelling a scheduled job with a deadline leaves nothing
// behind.
func TestRunNowAndCancelScheduled(t *testing.T) {
	h := schedHarness(t)
	t0 := h.clk.Now()
	h.submit(JobSpec{ID: "s", Queue: "q", NotBefore: t0.Add(time.Hour)},
		JobSpec{ID: "c", Queue: "q", NotBefore: t0.Add(time.Hour), Deadline: t0.Add(2 * time.Hour)},
		JobSpec{ID: "r", Queue: "q"})
	wantIDs(t, "pull", h.pull("agent", 4), "r")
	wantErr(t, h.s.RunNow("r"), ErrNotDelayed)
	wantErr(t, h.s.RunNow("nope"), ErrUnknownJob)
	if err := h.s.RunNow("s"); err != nil {
		t.Fatal(err)
	}
	h.check()
	wantErr(t, h.s.RunNow("s"), ErrNotDelayed)
	h.complete("r", FailedAttempt) // a retry, delayed a second
	if err := h.s.RunNow("r"); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "pull after RunNow", h.pull("agent", 4), "s", "r")
	if err := h.s.Cancel("c"); err != nil {
		t.Fatal(err)
	}
	h.check()
	h.complete("s", Succeeded)
	h.complete("r", Succeeded)
	if err := h.s.Idle(); err != nil {
		t.Fatal(err)
	}
	h.wantNext(time.Time{})
}
