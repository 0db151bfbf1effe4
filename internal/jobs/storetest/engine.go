package storetest

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/usherhq/usher/internal/jobs"
)

// openEngine opens the real engine on s.
func openEngine(t *testing.T, s jobs.Store) *jobs.Engine {
	t.Helper()
	e, err := jobs.Open(context.Background(), jobs.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// lease asks for up to n jobs as agent.
func lease(t *testing.T, e *jobs.Engine, agent string, n int) []jobs.LeasedJob {
	t.Helper()
	ans, err := e.Lease(context.Background(), jobs.LeaseRequest{Agent: agent, Slots: n})
	if err != nil {
		t.Fatal(err)
	}
	return ans.Jobs
}

// states lists every job's id, state, attempt and output as the engine
// shows them.
func states(t *testing.T, e *jobs.Engine) []string {
	t.Helper()
	list, err := e.Jobs(context.Background(), jobs.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range list {
		out = append(out, j.ID+":"+string(j.State)+":"+strconv.Itoa(j.Attempt)+":"+j.Output+":"+j.Workflow)
	}
	return out
}

// The real engine on the store, through a restart: queues, limits,
// finished, queued and waiting jobs are as before; jobs that ran are
// queued again and leased with their next attempt; ids continue.
func testEngineRestart(t *testing.T, open func(t *testing.T) jobs.Store) {
	ctx := context.Background()
	s := open(t)
	e := openEngine(t, s)
	if _, err := e.CreateQueue(ctx, jobs.Queue{Name: "q", Active: true, Retry: jobs.Retry{MaxAttempts: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetKeyLimit(ctx, jobs.KeyLimit{Pattern: "db", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	var specs []jobs.JobSpec
	for range 6 {
		specs = append(specs, jobs.JobSpec{Queue: "q", Payload: []byte(`"x"`)})
	}
	if _, err := e.Enqueue(ctx, specs); err != nil {
		t.Fatal(err)
	}
	wf, _, err := e.SubmitWorkflow(ctx, jobs.WorkflowSpec{Name: "w", Jobs: []jobs.WorkflowJob{
		{Name: "a", JobSpec: jobs.JobSpec{Queue: "q"}}, {Name: "b", JobSpec: jobs.JobSpec{Queue: "q"}}},
		Edges: []jobs.WorkflowEdge{{From: "a", To: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := lease(t, e, "agent-1", 4) // jobs 1-4
	results := []jobs.Result{{ID: got[0].ID, Attempt: got[0].Attempt, Output: "done"},
		{ID: got[1].ID, Attempt: got[1].Attempt, ExitCode: 2, Error: "boom"}}
	if _, err := e.Complete(ctx, "agent-1", results); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cancel(ctx, "5"); err != nil {
		t.Fatal(err)
	}
	before := states(t, e)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := openEngine(t, open(t))
	after := states(t, e2)
	want := slices.Clone(before)
	want[2], want[3] = "3:queued:1::", "4:queued:1::" // they ran: queued again
	if !slices.Equal(after, want) {
		t.Fatalf("after the restart\n got %v\nwant %v\n(before: %v)", after, want, before)
	}
	if q, err := e2.Queue("q"); err != nil || q.Retry.MaxAttempts != 2 {
		t.Fatalf("queue after restart = %+v, %v", q, err)
	}
	if l := e2.KeyLimits(); len(l) != 1 || l[0] != (jobs.KeyLimit{Pattern: "db", Limit: 2}) {
		t.Fatalf("limits after restart = %v", l)
	}
	w, err := e2.Workflow(ctx, wf)
	if err != nil || w.Name != "w" || len(w.Jobs) != 2 || w.Jobs[1].State != jobs.StateWaiting {
		t.Fatalf("workflow after restart = %+v, %v", w, err)
	}
	ids, err := e2.Enqueue(ctx, []jobs.JobSpec{{Queue: "q"}})
	if err != nil || ids[0] != "9" {
		t.Fatalf("the next job is %v, %v; want id 9", ids, err)
	}
	wf2, _, err := e2.SubmitWorkflow(ctx, jobs.WorkflowSpec{Name: "w2", Jobs: []jobs.WorkflowJob{{Name: "a", JobSpec: jobs.JobSpec{Queue: "q"}}}})
	if err != nil || wf2 != "2" {
		t.Fatalf("the next workflow is %q, %v; want 2", wf2, err)
	}
	again := lease(t, e2, "agent-2", 10)
	attempts := map[string]int{}
	for _, j := range again {
		attempts[j.ID] = j.Attempt
	}
	for id, a := range map[string]int{"2": 2, "3": 2, "4": 2, "6": 1, "7": 1, "9": 1} {
		if attempts[id] != a {
			t.Errorf("after the restart job %s leased at attempt %d; want %d (leased: %+v)", id, attempts[id], a, again)
		}
	}
}
