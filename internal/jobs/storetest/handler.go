package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// What a handler reports beside its outcome, through the store: a snooze
// leaves the job queued with its attempts that count and its wake-up
// (which Load gives back); progress and the JSON result are kept and read
// back; a reset forgets both.
func testHandlerReports(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	t0 := time.UnixMilli(1700000300000)
	wake := t0.Add(time.Minute)
	Apply(t, s, Insert(1),
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "a", At: t0},
		jobs.Op{Kind: jobs.OpProgress, ID: 1, Progress: &jobtype.Progress{Value: 0.25, Message: "a quarter"}},
		jobs.Op{Kind: jobs.OpSnooze, ID: 1, Attempt: 0, At: wake})
	j := job(t, s, 1)
	if j.State != jobtype.StateQueued || j.Attempt != 0 || j.Agent != "" {
		t.Fatalf("after a snooze: state %s, attempt %d, agent %q; want queued, 0, none", j.State, j.Attempt, j.Agent)
	}
	if j.Progress == nil || *j.Progress != (jobtype.Progress{Value: 0.25, Message: "a quarter"}) {
		t.Fatalf("progress = %+v, want 0.25 \"a quarter\"", j.Progress)
	}
	snap := load(t, s)
	if len(snap.Jobs) != 1 || snap.Jobs[0].Attempt != 0 || snap.Jobs[0].Running || !snap.Jobs[0].ReadyAt.Equal(wake) {
		t.Fatalf("Load after a snooze = %+v; want attempt 0, not running, ready at %v", snap.Jobs, wake)
	}
	result := json.RawMessage(`{"rows":3}`)
	Apply(t, s,
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "a", At: wake},
		jobs.Op{Kind: jobs.OpProgress, ID: 1, Progress: &jobtype.Progress{Value: 1}},
		jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateSucceeded, At: wake, Result: &jobtype.Result{Value: result}})
	j = job(t, s, 1)
	if j.State != jobtype.StateSucceeded || string(j.Result) != string(result) {
		t.Fatalf("after success: state %s, result %s; want succeeded, %s", j.State, j.Result, result)
	}
	if j.Progress == nil || *j.Progress != (jobtype.Progress{Value: 1}) {
		t.Fatalf("progress = %+v, want the latest (1)", j.Progress)
	}
	page, err := s.Jobs(context.Background(), jobs.Filter{Limit: 10})
	list := page.Jobs
	if err != nil || len(list) != 1 || string(list[0].Result) != string(result) || list[0].Progress == nil {
		t.Fatalf("Jobs = %+v, %v; want the job with its result and progress", list, err)
	}
	Apply(t, s, jobs.Op{Kind: jobs.OpReset, ID: 1, At: wake})
	if j := job(t, s, 1); j.Progress != nil || j.Result != nil {
		t.Fatalf("after a reset: progress %+v, result %s; want neither", j.Progress, j.Result)
	}
}

// A failed attempt's result is kept through its requeue; changes to a
// missing job do nothing.
func testHandlerReportsOnRequeue(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	t0 := time.UnixMilli(1700000400000)
	Apply(t, s, Insert(1),
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "a", At: t0},
		jobs.Op{Kind: jobs.OpRequeue, ID: 1, At: t0, Result: &jobtype.Result{ExitCode: 2, Error: "e", Value: json.RawMessage(`[1,2]`)}},
		jobs.Op{Kind: jobs.OpSnooze, ID: 99, Attempt: 0, At: t0},
		jobs.Op{Kind: jobs.OpProgress, ID: 99, Progress: &jobtype.Progress{Value: 0.5}})
	if j := job(t, s, 1); string(j.Result) != `[1,2]` || j.State != jobtype.StateQueued {
		t.Fatalf("after a requeue with a result: %s %s; want queued, [1,2]", j.State, j.Result)
	}
	if _, err := s.Job(context.Background(), 99); err == nil {
		t.Fatal("a snooze or progress of a missing job made it exist")
	}
}
