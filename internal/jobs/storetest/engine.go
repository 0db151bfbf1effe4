package storetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
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
func lease(t *testing.T, e *jobs.Engine, agent string, n int) []jobtype.LeasedJob {
	t.Helper()
	ans, err := e.Lease(context.Background(), jobtype.LeaseRequest{Agent: agent, Slots: n})
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
	if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true, Retry: jobtype.RetryPolicy{MaxAttempts: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetKeyLimit(ctx, jobtype.KeyLimit{Pattern: "db", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	var specs []jobtype.JobSpec
	for range 6 {
		specs = append(specs, jobtype.JobSpec{Queue: "q", Payload: []byte(`"x"`)})
	}
	if _, err := e.Enqueue(ctx, specs); err != nil {
		t.Fatal(err)
	}
	wf, _, err := e.SubmitWorkflow(ctx, jobtype.WorkflowSpec{Name: "w", Jobs: []jobtype.WorkflowJob{
		{Name: "a", JobSpec: jobtype.JobSpec{Queue: "q"}}, {Name: "b", JobSpec: jobtype.JobSpec{Queue: "q"}}},
		Edges: []jobtype.WorkflowEdge{{From: "a", To: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := lease(t, e, "agent-1", 4) // jobs 1-4
	results := []jobtype.Result{{ID: got[0].ID, Attempt: got[0].Attempt, Output: "done"},
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
	if l := e2.KeyLimits(); len(l) != 1 || l[0] != (jobtype.KeyLimit{Pattern: "db", Limit: 2}) {
		t.Fatalf("limits after restart = %v", l)
	}
	w, err := e2.Workflow(ctx, wf)
	if err != nil || w.Name != "w" || len(w.Jobs) != 2 || w.Jobs[1].State != jobtype.StateWaiting {
		t.Fatalf("workflow after restart = %+v, %v", w, err)
	}
	ids, err := e2.Enqueue(ctx, []jobtype.JobSpec{{Queue: "q"}})
	if err != nil || ids[0] != "9" {
		t.Fatalf("the next job is %v, %v; want id 9", ids, err)
	}
	wf2, _, err := e2.SubmitWorkflow(ctx, jobtype.WorkflowSpec{Name: "w2", Jobs: []jobtype.WorkflowJob{{Name: "a", JobSpec: jobtype.JobSpec{Queue: "q"}}}})
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

// pruneAfterRead is the store with an injected fault (the moment is what
// cannot be had on demand from the real parts): right after the engine's
// first read of the kind named by when ("job" or "workflow"), every
// finished job and every workflow left empty is pruned, as the hourly
// prune would do at the worst moment for a retry.
type pruneAfterRead struct {
	jobs.Store
	t    *testing.T
	when string
}

func (p *pruneAfterRead) prune(kind string) {
	if p.when == kind {
		p.when = ""
		Apply(p.t, p.Store, jobs.Op{Kind: jobs.OpPrune, At: time.Now().Add(time.Hour)})
	}
}

func (p *pruneAfterRead) Job(ctx context.Context, id int64) (jobtype.Job, error) {
	j, err := p.Store.Job(ctx, id)
	p.prune("job")
	return j, err
}

func (p *pruneAfterRead) WorkflowInfo(ctx context.Context, id int64) (string, error) {
	name, err := p.Store.WorkflowInfo(ctx, id)
	p.prune("workflow")
	return name, err
}

// A retry of a failed job that a prune deletes while the retry runs either
// brings the job back whole, with its workflow (the prune came after the
// retry's reads), or answers not found and leaves nothing live (the prune
// came between the read of the job and of its workflow). The engine and
// the store never disagree, also after a restart.
//
// inWorkflow puts the job in a workflow of its own; when is the read
// after which the prune runs: "job" (the retry's first) or "workflow".
func testRetryRacingAPrune(t *testing.T, open func(t *testing.T) jobs.Store, inWorkflow bool, when string) {
	ctx := context.Background()
	s := open(t)
	racy := &pruneAfterRead{Store: s, t: t}
	e := openEngine(t, racy)
	if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true, Retry: jobtype.RetryPolicy{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	spec := jobtype.JobSpec{Queue: "q", Payload: []byte(`"x"`)}
	var id, wf string
	if inWorkflow {
		var ids map[string]string
		var err error
		if wf, ids, err = e.SubmitWorkflow(ctx, jobtype.WorkflowSpec{Name: "w", Jobs: []jobtype.WorkflowJob{{Name: "a", JobSpec: spec}}}); err != nil {
			t.Fatal(err)
		}
		id = ids["a"]
	} else {
		ids, err := e.Enqueue(ctx, []jobtype.JobSpec{spec})
		if err != nil {
			t.Fatal(err)
		}
		id = ids[0]
	}
	got := lease(t, e, "agent-1", 1)
	if _, err := e.Complete(ctx, "agent-1", []jobtype.Result{{ID: got[0].ID, Attempt: 1, ExitCode: 1, Error: "boom"}}); err != nil {
		t.Fatal(err)
	}

	racy.when = when
	_, err := e.Retry(ctx, id)
	if racy.when != "" {
		t.Fatalf("the retry made no %s read", when)
	}
	back := !inWorkflow || when == "workflow"
	want := []string{id + ":queued:0::" + wf}
	if !back {
		if !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("retry of a job pruned between its reads: %v; want not found", err)
		}
		want = nil
	} else if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := states(t, e); !slices.Equal(got, want) {
		t.Fatalf("after the retry the engine lists %v; want %v", got, want)
	}
	if !back {
		if got := lease(t, e, "agent-1", 1); len(got) != 0 {
			t.Fatalf("the engine hands out a job the store no longer has: %+v", got)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openEngine(t, open(t))
	if got := states(t, e2); !slices.Equal(got, want) {
		t.Fatalf("after a restart the engine lists %v; want %v", got, want)
	}
	if !back {
		return
	}
	if inWorkflow {
		if w, err := e2.Workflow(ctx, wf); err != nil || w.Name != "w" || len(w.Jobs) != 1 {
			t.Fatalf("workflow after the retry and a restart: %+v, %v; want w with its job", w, err)
		}
	}
	if again := lease(t, e2, "agent-2", 1); len(again) != 1 || again[0].ID != id || string(again[0].Payload) != `"x"` {
		t.Fatalf("after the restart the retried job is leased as %+v", again)
	}
}
