package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
)

// Worker.ExitWhenIdle: Run runs the jobs there are, then returns nil by
// itself once no job came for that long.
func TestWorkerExitsWhenIdle(t *testing.T) {
	srv, c := setup(t, "q")
	ids := enqueue(t, c, client.JobSpec{Queue: "q"}, client.JobSpec{Queue: "q"})
	var ran atomic.Int32
	w := &client.Worker{Client: client.New(srv.URL, srv.AdminToken), Agent: "idle", ExitWhenIdle: 300 * time.Millisecond,
		Handlers: map[string]client.Handler{"q": func(context.Context, *client.LeasedJob) (string, error) {
			ran.Add(1)
			return "", nil
		}}}
	if err := runWorker(t, w).wait(t); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 2 {
		t.Fatalf("ran %d jobs before leaving; want 2", ran.Load())
	}
	for _, id := range ids {
		if j := waitJob(t, c, id, finished); j.State != client.StateSucceeded {
			t.Fatalf("job %s %s", id, j.State)
		}
	}
}

// Worker.UntilWorkflow: Run returns nil once the workflow finished, and an
// error for a workflow the server does not know.
func TestWorkerUntilWorkflow(t *testing.T) {
	srv, c := setup(t, "q")
	wf, err := c.SubmitWorkflow(t.Context(), client.WorkflowSpec{Jobs: []client.WorkflowJob{
		{Name: "a", JobSpec: client.JobSpec{Queue: "q"}},
		{Name: "b", JobSpec: client.JobSpec{Queue: "q", After: []string{"a"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]client.Handler{"q": func(context.Context, *client.LeasedJob) (string, error) { return "", nil }}
	w := &client.Worker{Client: client.New(srv.URL, srv.AdminToken), Agent: "wf", UntilWorkflow: wf.ID, Handlers: h}
	if err := runWorker(t, w).wait(t); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Workflow(t.Context(), wf.ID); err != nil || got.State != "succeeded" {
		t.Fatalf("workflow %+v %v; want succeeded when Run returned", got, err)
	}
	w = &client.Worker{Client: client.New(srv.URL, srv.AdminToken), Agent: "wf2", UntilWorkflow: "999", Handlers: h}
	if err := runWorker(t, w).wait(t); client.StatusOf(err) != 404 {
		t.Fatalf("Run for an unknown workflow returned %v; want a 404", err)
	}
}
