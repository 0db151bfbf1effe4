package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/usherhq/usher/client"
)

// submitShellWorkflow submits a → b on queue sh, each job a shell script.
func submitShellWorkflow(t *testing.T, c *client.Client, a, b string) client.SubmittedWorkflow {
	t.Helper()
	wf, err := c.SubmitWorkflow(t.Context(), client.WorkflowSpec{Name: "pair", Jobs: []client.WorkflowJob{
		{Name: "a", JobSpec: client.JobSpec{Queue: "sh", Payload: raw(a)}},
		{Name: "b", JobSpec: client.JobSpec{Queue: "sh", Payload: raw(b), After: []string{"a"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// runUsher runs the usher binary against srv as the admin and returns its
// output and exit status.
func runUsher(t *testing.T, server, token string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(usherBinary(t), append(args, "--server", server, "--token", token)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("usher %v: %v", args, err)
	return "", 0
}

// usher agent --exit-when-idle: the agent runs the jobs there are, then,
// with no more work for the given time, exits 0.
func TestAgentExitsWhenIdle(t *testing.T) {
	srv, c := agentServer(t, "sh")
	ids := enqueueJobs(t, c, client.JobSpec{Queue: "sh", Payload: raw("true")}, client.JobSpec{Queue: "sh", Payload: raw("true")})
	a := startAgent(t, srv, "--exit-when-idle", "1s", "--", "sh", "-c", `eval "$1"`, "sh")
	if err := a.wait(t); err != nil {
		t.Fatalf("agent exited with %v; want 0", err)
	}
	for _, id := range ids {
		if j, err := c.Job(t.Context(), id); err != nil || j.State != client.StateSucceeded {
			t.Fatalf("job %s: %+v %v; want it succeeded before the agent left", id, j, err)
		}
	}
	if !strings.Contains(a.logText(), "no work for a while") {
		t.Errorf("the agent's log does not say why it stopped:\n%s", a.logText())
	}
}

// usher agent --until-workflow: the agent exits 0 once the workflow
// finished, succeeded or failed; an unknown workflow is an error.
func TestAgentUntilWorkflow(t *testing.T) {
	for _, c := range []struct {
		name, a, state string
	}{
		{"succeeded", "true", "succeeded"},
		{"failed", "exit 4", "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cl := agentServer(t, "sh")
			wf := submitShellWorkflow(t, cl, c.a, "true")
			a := startAgent(t, srv, "--until-workflow", wf.ID, "--", "sh", "-c", `eval "$1"`, "sh")
			if err := a.wait(t); err != nil {
				t.Fatalf("agent exited with %v; want 0", err)
			}
			got, err := cl.Workflow(t.Context(), wf.ID)
			if err != nil || got.State != c.state {
				t.Fatalf("workflow %+v %v; want %s when the agent left", got, err, c.state)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		srv, _ := agentServer(t, "sh")
		a := startAgent(t, srv, "--until-workflow", "999", "--", "true")
		if err := a.wait(t); err == nil || !strings.Contains(a.logText(), "workflow 999") {
			t.Fatalf("agent exited with %v, log:\n%s\nwant an error naming workflow 999", err, a.logText())
		}
	})
}

// usher workflow wait: exit 2 while the workflow runs past --timeout, 0
// once it succeeded, 1 once it failed; each time it shows the workflow.
func TestWorkflowWaitExitStatus(t *testing.T) {
	srv, c := agentServer(t, "sh")
	ok := submitShellWorkflow(t, c, "true", "true")
	bad := submitShellWorkflow(t, c, "true", "exit 5")
	out, code := runUsher(t, srv.URL, srv.AdminToken, "workflow", "wait", ok.ID, "--timeout", "200ms")
	if code != 2 || !strings.Contains(out, "pair: running") || !strings.Contains(out, "still runs after 200ms") {
		t.Fatalf("wait with a timeout: exit %d\n%s\nwant 2, the workflow running", code, out)
	}
	startAgent(t, srv, "--", "sh", "-c", `eval "$1"`, "sh")
	for _, w := range []struct {
		id, state string
		code      int
	}{{ok.ID, "succeeded", 0}, {bad.ID, "failed", 1}} {
		out, code := runUsher(t, srv.URL, srv.AdminToken, "workflow", "wait", w.id)
		if code != w.code || !strings.Contains(out, "pair: "+w.state) {
			t.Fatalf("wait for workflow %s: exit %d\n%s\nwant %d and %s", w.id, code, out, w.code, w.state)
		}
	}
	if out, code := runUsher(t, srv.URL, srv.AdminToken, "workflow", "wait", "999"); code != 1 || !strings.Contains(out, "404") {
		t.Fatalf("unknown workflow: exit %d\n%s\nwant 1 and 404", code, out)
	}
}
