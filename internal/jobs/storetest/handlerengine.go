package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/testclock"
	"github.com/usherhq/usher/jobtype"
)

// handlerEngine is the real engine on a store with an injected clock.
type handlerEngine struct {
	t   *testing.T
	e   *jobs.Engine
	clk *testclock.Clock
}

func openHandlerEngine(t *testing.T, s jobs.Store, clk *testclock.Clock) *handlerEngine {
	t.Helper()
	e, err := jobs.Open(context.Background(), jobs.Config{Store: s, Now: clk.Now, LeaseTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return &handlerEngine{t: t, e: e, clk: clk}
}

func (h *handlerEngine) job(id string) jobtype.Job {
	h.t.Helper()
	j, err := h.e.Job(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

func (h *handlerEngine) complete(r jobtype.Result) jobtype.Ack {
	h.t.Helper()
	acks, err := h.e.Complete(context.Background(), "a", []jobtype.Result{r})
	if err != nil {
		h.t.Fatal(err)
	}
	return acks[0]
}

// advanceTo moves the clock to at and ticks, as Run does when woken.
func (h *handlerEngine) advanceTo(at time.Time) {
	h.t.Helper()
	h.clk.Set(at)
	tick(h.t, h.e)
}

func (h *handlerEngine) enqueue(spec jobtype.JobSpec) string {
	h.t.Helper()
	ids, err := h.e.Enqueue(context.Background(), []jobtype.JobSpec{spec})
	if err != nil {
		h.t.Fatal(err)
	}
	return ids[0]
}

// The engine on the store: a snooze waits without counting the attempt
// (through a restart), a cancel fails the job at once, progress and the
// result are kept, and a constant backoff waits exactly its base.
func testEngineHandlerReports(t *testing.T, open func(t *testing.T) jobs.Store) {
	ctx := context.Background()
	clk := testclock.New(time.UnixMilli(1700000500000))
	s := open(t)
	h := openHandlerEngine(t, s, clk)
	if _, err := h.e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true, Retry: jobtype.RetryPolicy{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	id := h.enqueue(jobtype.JobSpec{Queue: "q"})
	lease(t, h.e, "a", 1)
	if ack := h.complete(jobtype.Result{ID: id, Attempt: 1, SnoozeMs: 60000}); !ack.Snoozed || ack.Retrying || ack.Ignored {
		t.Fatalf("snooze ack = %+v, want snoozed", ack)
	}
	if j := h.job(id); j.State != jobtype.StateDelayed || j.Attempt != 0 {
		t.Fatalf("after a snooze: %s attempt %d; want delayed, attempt 0", j.State, j.Attempt)
	}
	if got, want := h.e.NextDeadline(), clk.Now().Add(time.Minute); !got.Equal(want) {
		t.Fatalf("NextDeadline = %v, want the wake-up %v", got, want)
	}
	if got := lease(t, h.e, "a", 1); len(got) != 0 {
		t.Fatalf("a snoozed job was leased before its wake-up: %+v", got)
	}
	// Through a restart the job still sleeps, its attempt not counted.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	h = openHandlerEngine(t, s, clk)
	if j := h.job(id); j.State != jobtype.StateDelayed || j.Attempt != 0 {
		t.Fatalf("after a restart: %s attempt %d; want delayed, attempt 0", j.State, j.Attempt)
	}
	h.advanceTo(clk.Now().Add(time.Minute))
	lj := lease(t, h.e, "a", 1)
	if len(lj) != 1 || lj[0].Attempt != 1 {
		t.Fatalf("after the wake-up leased %+v; want the job, attempt 1 again", lj)
	}
	ans, err := h.e.Progress(ctx, jobtype.ProgressRequest{Agent: "a", ID: id, Attempt: 1, Value: 0.5, Message: "half"})
	if err != nil || ans.Ignored {
		t.Fatalf("progress = %+v, %v", ans, err)
	}
	if ans, err := h.e.Progress(ctx, jobtype.ProgressRequest{Agent: "a", ID: id, Attempt: 2, Value: 0.9}); err != nil || !ans.Ignored {
		t.Fatalf("progress of another attempt = %+v, %v; want ignored", ans, err)
	}
	if p := h.job(id).Progress; p == nil || *p != (jobtype.Progress{Value: 0.5, Message: "half"}) {
		t.Fatalf("progress shown = %+v, want 0.5 half", p)
	}
	h.complete(jobtype.Result{ID: id, Attempt: 1, Value: json.RawMessage(`{"ok":true}`)})
	if j := h.job(id); j.State != jobtype.StateSucceeded || string(j.Result) != `{"ok":true}` {
		t.Fatalf("after success: %s result %s", j.State, j.Result)
	}

	// Cancel: no retry although the policy allows three attempts.
	c := h.enqueue(jobtype.JobSpec{Queue: "q", Retry: &jobtype.RetryPolicy{MaxAttempts: 3}})
	lease(t, h.e, "a", 1)
	if ack := h.complete(jobtype.Result{ID: c, Attempt: 1, ExitCode: 1, Cancel: true}); ack.Retrying || ack.Ignored {
		t.Fatalf("cancel ack = %+v", ack)
	}
	if j := h.job(c); j.State != jobtype.StateFailed || j.Error != "cancelled by its handler" {
		t.Fatalf("a cancelled job: %s %q; want failed, cancelled by its handler", j.State, j.Error)
	}

	// A constant backoff waits exactly its base.
	b := h.enqueue(jobtype.JobSpec{Queue: "q", Retry: &jobtype.RetryPolicy{MaxAttempts: 2},
		Backoff: &jobtype.Backoff{Policy: "constant", BaseMs: 5000}})
	lease(t, h.e, "a", 1)
	failedAt := clk.Now()
	if ack := h.complete(jobtype.Result{ID: b, Attempt: 1, ExitCode: 1}); !ack.Retrying {
		t.Fatalf("ack = %+v, want a retry", ack)
	}
	if got, want := h.e.NextDeadline(), failedAt.Add(5*time.Second); !got.Equal(want) {
		t.Fatalf("retry at %v, want %v", got, want)
	}
	if j := h.job(b); j.Backoff == nil || j.Backoff.Policy != "constant" || j.Backoff.BaseMs != 5000 {
		t.Fatalf("the job shows backoff %+v", j.Backoff)
	}
}

// A job past its time limit plus grace is failed by the server although
// its agent renews; the agent is told to stop it; the attempt is retried
// by the policy. The engine's deadline is that moment exactly.
func testEngineTimeLimit(t *testing.T, open func(t *testing.T) jobs.Store) {
	ctx := context.Background()
	clk := testclock.New(time.UnixMilli(1700000600000))
	h := openHandlerEngine(t, open(t), clk)
	if _, err := h.e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true, Retry: jobtype.RetryPolicy{MaxAttempts: 2}}); err != nil {
		t.Fatal(err)
	}
	id := h.enqueue(jobtype.JobSpec{Queue: "q", TimeoutMs: 10000})
	start := clk.Now()
	lease(t, h.e, "a", 1)
	limit := start.Add(10*time.Second + jobs.Grace(10*time.Second))
	if got := h.e.NextDeadline(); !got.Equal(limit) {
		t.Fatalf("NextDeadline = %v, want the limit with grace %v", got, limit)
	}
	h.advanceTo(limit.Add(-time.Millisecond))
	if ans, err := h.e.Renew("a"); err != nil || len(ans.Stop) != 0 {
		t.Fatalf("renew before the limit = %+v, %v; want nothing to stop", ans, err)
	}
	h.advanceTo(limit)
	ans, err := h.e.Renew("a")
	if err != nil || len(ans.Stop) != 1 || ans.Stop[0] != (jobtype.JobRef{ID: id, Attempt: 1}) {
		t.Fatalf("renew after the limit = %+v, %v; want a stop of attempt 1", ans, err)
	}
	j := h.job(id)
	if j.State == jobtype.StateRunning || j.State.Final() || !strings.Contains(j.Error, "time limit") {
		t.Fatalf("after the limit: %s %q; want retried with a time-limit error", j.State, j.Error)
	}
	if ack := h.complete(jobtype.Result{ID: id, Attempt: 1}); !ack.Ignored {
		t.Fatalf("the late report of the stopped attempt = %+v, want ignored", ack)
	}
}
