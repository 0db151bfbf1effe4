package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/testclock"
	"github.com/usherhq/usher/jobtype"
)

// A scheduled job's runAt and deadline are kept with its spec; a requeue
// without a result (RunNow) writes its ready time and nothing else; a
// job discarded at its deadline reads back cancelled with the error.
func testScheduleStored(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	runAt, deadline := time.UnixMilli(1800000000123).UTC(), time.UnixMilli(1800000360456).UTC()
	ins := Insert(1)
	ins.Record.Spec.RunAt, ins.Record.Spec.Deadline = &runAt, &deadline
	now := time.UnixMilli(1700000100000)
	Apply(t, s, ins, Insert(2), Insert(3),
		jobs.Op{Kind: jobs.OpRequeue, ID: 2, At: now},
		jobs.Op{Kind: jobs.OpFinish, ID: 3, State: jobtype.StateCancelled, At: now,
			Result: &jobtype.Result{ID: "3", ExitCode: -1, Error: jobs.DeadlinePassed}})
	s.Close()
	s = open(t)
	snap := load(t, s)
	if len(snap.Jobs) != 2 {
		t.Fatalf("loaded %d unfinished jobs; want 2", len(snap.Jobs))
	}
	r1, r2 := snap.Jobs[0], snap.Jobs[1]
	if r1.Spec.RunAt == nil || !r1.Spec.RunAt.Equal(runAt) || r1.Spec.Deadline == nil || !r1.Spec.Deadline.Equal(deadline) {
		t.Fatalf("job 1 loaded with runAt %v, deadline %v; want %v, %v", r1.Spec.RunAt, r1.Spec.Deadline, runAt, deadline)
	}
	if !r1.ReadyAt.IsZero() || !r2.ReadyAt.Equal(now) || r2.Attempt != 0 || r2.Running {
		t.Fatalf("ready times %v, %v (attempt %d); want none and %v", r1.ReadyAt, r2.ReadyAt, r2.Attempt, now)
	}
	if j := job(t, s, 1); j.RunAt == nil || !j.RunAt.Equal(runAt) || j.Deadline == nil || !j.Deadline.Equal(deadline) {
		t.Fatalf("job 1 reads runAt %v, deadline %v", j.RunAt, j.Deadline)
	}
	if j := job(t, s, 2); j.Error != "" || j.ExitCode != nil || j.State != jobtype.StateQueued {
		t.Fatalf("job 2 after a plain requeue: %+v", j)
	}
	if j := job(t, s, 3); j.State != jobtype.StateCancelled || j.Error != jobs.DeadlinePassed {
		t.Fatalf("job 3: state %s, error %q", j.State, j.Error)
	}
}

// scheduledEngine opens the real engine on s with the test's clock.
func scheduledEngine(t *testing.T, s jobs.Store, clk *testclock.Clock) *jobs.Engine {
	t.Helper()
	e, err := jobs.Open(context.Background(), jobs.Config{Store: s, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ids of the jobs in a state, in id order.
func inState(t *testing.T, e *jobs.Engine, st jobtype.State) []string {
	t.Helper()
	list, err := e.Jobs(context.Background(), jobs.Filter{State: st, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range list {
		out = append(out, j.ID)
	}
	return out
}

func leasedIDs(t *testing.T, e *jobs.Engine) []string {
	t.Helper()
	var out []string
	for _, j := range lease(t, e, "agent", 10) {
		out = append(out, j.ID)
	}
	slices.Sort(out)
	return out
}

func wantList(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v; want %v", what, got, want)
	}
}

// The real engine with an injected clock, through a restart (a leader
// failover for Redis): every scheduled job is kept and none runs early
// or twice; a job readied by RunNow stays ready; a deadline that passed
// while the engine was down discards its job at the first tick; a
// workflow job's due time applies once its dependency is done.
func testScheduledRestart(t *testing.T, open func(t *testing.T) jobs.Store) {
	ctx := context.Background()
	t0 := time.UnixMilli(1800000000000)
	clk := testclock.New(t0)
	s := open(t)
	e := scheduledEngine(t, s, clk)
	for _, q := range []jobtype.Queue{{Name: "q", Active: true}, {Name: "p"}} {
		if _, err := e.CreateQueue(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	ids, err := e.Enqueue(ctx, []jobtype.JobSpec{
		{Queue: "q", RunAt: at(time.Hour)},                                  // 1
		{Queue: "q", DelayMs: 2 * 3600 * 1000, Deadline: at(3 * time.Hour)}, // 2
		{Queue: "q", RunAt: at(time.Hour)},                                  // 3: run now, leased
		{Queue: "p", Deadline: at(30 * time.Minute)},                        // 4: paused, discarded at its deadline
		{Queue: "q", RunAt: at(-time.Minute)},                               // 5: due already
		{Queue: "p", RunAt: at(time.Hour)},                                  // 6: run now, paused
	})
	if err != nil {
		t.Fatal(err)
	}
	wantList(t, "ids", ids, "1", "2", "3", "4", "5", "6")
	wf, byName, err := e.SubmitWorkflow(ctx, jobtype.WorkflowSpec{Name: "w", Jobs: []jobtype.WorkflowJob{
		{Name: "a", JobSpec: jobtype.JobSpec{Queue: "q"}},
		{Name: "b", JobSpec: jobtype.JobSpec{Queue: "q", After: []string{"a"}, RunAt: at(time.Hour)}}}})
	if err != nil || wf == "" {
		t.Fatal(err)
	}
	for _, id := range []string{"3", "6"} {
		if _, err := e.RunNow(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	wantList(t, "scheduled", inState(t, e, jobtype.StateScheduled), "1", "2")
	wantList(t, "waiting", inState(t, e, jobtype.StateWaiting), byName["b"])
	if next := e.NextDeadline(); !next.Equal(t0.Add(30 * time.Minute)) {
		t.Fatalf("NextDeadline %v; want job 4's deadline %v", next, t0.Add(30*time.Minute))
	}
	got := lease(t, e, "agent", 10)
	var results []jobtype.Result
	var leased []string
	for _, j := range got {
		leased = append(leased, j.ID)
		results = append(results, jobtype.Result{ID: j.ID, Attempt: j.Attempt})
	}
	slices.Sort(leased)
	wantList(t, "leased before the restart", leased, "3", "5", byName["a"])
	if _, err := e.Complete(ctx, "agent", results); err != nil {
		t.Fatal(err)
	}
	wantList(t, "scheduled after a", inState(t, e, jobtype.StateScheduled), "1", "2", byName["b"])

	s.Close()
	clk.Advance(40 * time.Minute)
	s = open(t)
	e = scheduledEngine(t, s, clk)
	tick(t, e)
	if j, err := e.Job(ctx, "4"); err != nil || j.State != jobtype.StateCancelled || j.Error != jobs.DeadlinePassed {
		t.Fatalf("job 4 after its deadline: %+v, %v", j, err)
	}
	wantList(t, "scheduled after the restart", inState(t, e, jobtype.StateScheduled), "1", "2", byName["b"])
	wantList(t, "queued after the restart", inState(t, e, jobtype.StateQueued), "6")
	if next := e.NextDeadline(); !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("NextDeadline %v; want the first due time %v", next, t0.Add(time.Hour))
	}
	wantList(t, "leased early", leasedIDs(t, e))
	clk.Advance(20*time.Minute - time.Millisecond)
	tick(t, e)
	wantList(t, "leased a millisecond early", leasedIDs(t, e))
	clk.Advance(time.Millisecond)
	tick(t, e)
	wantList(t, "leased when due", leasedIDs(t, e), "1", byName["b"])
	if next := e.NextDeadline(); !next.After(t0.Add(time.Hour)) {
		t.Fatalf("NextDeadline %v; want later than now", next)
	}
	clk.Advance(time.Hour)
	tick(t, e)
	wantList(t, "leased at two hours", leasedIDs(t, e), "2")

	// A retry of the job discarded at its deadline is queued, and stays
	// so through another restart: its deadline is past, its runAt gone.
	if j, err := e.Retry(ctx, "4"); err != nil || j.State != jobtype.StateQueued {
		t.Fatalf("retry of job 4: %+v, %v", j, err)
	}
	s.Close()
	e = scheduledEngine(t, open(t), clk)
	tick(t, e)
	if j, err := e.Job(ctx, "4"); err != nil || j.State != jobtype.StateQueued {
		t.Fatalf("retried job 4 after a restart: %+v, %v; want queued", j, err)
	}
}
