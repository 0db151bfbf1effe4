package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/testwait"
)

// A command reports progress (shown while it runs) and a result on its
// control channel, snoozes (not counted as an attempt), cancels (no
// retry), and a line the agent cannot take is noted in its output.
func TestAgentControlChannel(t *testing.T) {
	srv, c := agentServer(t)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "sh", Retry: &client.RetryPolicy{MaxAttempts: 3}}); err != nil {
		t.Fatal(err)
	}
	f := mkfifos(t, "started", "go")
	marker := filepath.Join(t.TempDir(), "ran-once")
	startAgent(t, srv, "--concurrency", "4", "--", "sh", "-c", `eval "$1"`, "sh")
	ids := enqueueJobs(t, c,
		client.JobSpec{Queue: "sh", TimeoutMs: 60000, Payload: raw(fmt.Sprintf(
			`echo "progress 0.25 warming up" >&$USHER_CONTROL_FD; echo started > %s; read x < %s; echo 'result {"rows": 3}' >&3; echo done`,
			f["started"], f["go"]))},
		client.JobSpec{Queue: "sh", TimeoutMs: 60000, Payload: raw(fmt.Sprintf(
			`if [ -e %[1]s ]; then echo second; else touch %[1]s; echo "snooze 50" >&3; exit 9; fi`, marker))},
		client.JobSpec{Queue: "sh", TimeoutMs: 60000, Payload: raw(`echo "cancel no such host" >&3; exit 4`)},
		client.JobSpec{Queue: "sh", TimeoutMs: 60000, Payload: raw(`echo "progress lots" >&3; echo "jump now" >&3; echo 'result {' >&3; echo ok`)},
	)
	if _, err := os.ReadFile(f["started"]); err != nil { // blocks until the job runs
		t.Fatal(err)
	}
	var j client.Job
	shown := func() bool { // the agent sends the line while the command runs on
		var err error
		if j, err = c.Job(t.Context(), ids[0]); err != nil {
			t.Fatal(err)
		}
		return j.Progress != nil
	}
	if err := testwait.Until(30*time.Second, shown, "job %s showing progress", ids[0]); err != nil {
		t.Fatal(err)
	}
	if j.State != client.StateRunning || j.Progress.Value != 0.25 || j.Progress.Message != "warming up" {
		t.Fatalf("running job: %s progress %+v, want running at 0.25 \"warming up\"", j.State, j.Progress)
	}
	if err := os.WriteFile(f["go"], []byte("now\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if j := waitFinished(t, c, ids[0]); j.State != client.StateSucceeded || string(j.Result) != `{"rows":3}` || j.Output != "done\n" {
		t.Errorf("progress and result: %s result %s output %q; want succeeded, {\"rows\":3}, done", j.State, j.Result, j.Output)
	}
	if j := waitFinished(t, c, ids[1]); j.State != client.StateSucceeded || j.Attempt != 1 || j.Output != "second\n" {
		t.Errorf("snooze: %s attempt %d output %q; want succeeded at attempt 1 (the snooze not counted), second", j.State, j.Attempt, j.Output)
	}
	if j := waitFinished(t, c, ids[2]); j.State != client.StateFailed || j.Attempt != 1 || j.Error != "no such host" || *j.ExitCode != 4 {
		t.Errorf("cancel: %s attempt %d error %q exit %s; want failed at once with the message, exit 4", j.State, j.Attempt, j.Error, exitText(j.ExitCode))
	}
	j = waitFinished(t, c, ids[3])
	for _, want := range []string{"control line 1 ignored: progress", "control line 2 ignored: unknown command \"jump\"", "control line 3 ignored"} {
		if !strings.Contains(j.Output, want) {
			t.Errorf("bad lines: output %q lacks %q", j.Output, want)
		}
	}
	if j.State != client.StateSucceeded {
		t.Errorf("bad lines: %s, want succeeded (its exit code)", j.State)
	}
}

// `usher jobs show` shows a job's own backoff, its progress and its
// result.
func TestJobsShowProgressAndResult(t *testing.T) {
	srv, c := agentServer(t, "q")
	t.Setenv("USHER_TOKEN", "")
	id := enqueueJobs(t, c, client.JobSpec{Queue: "q", Backoff: &client.Backoff{Policy: "linear", BaseMs: 500, MaxMs: 10000}})[0]
	if ans, err := c.Lease(t.Context(), client.LeaseRequest{Agent: "a", Slots: 1}); err != nil || len(ans.Jobs) != 1 {
		t.Fatalf("lease = %+v, %v", ans, err)
	}
	if _, err := c.Progress(t.Context(), client.ProgressRequest{Agent: "a", ID: id, Attempt: 1, Value: 0.4, Message: "copying"}); err != nil {
		t.Fatal(err)
	}
	show := func() string {
		out, _, err := runCLI(t, "", "jobs", "show", id, "--server", srv.URL, "--token", srv.AdminToken)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := show()
	for _, want := range []string{"backoff:", "linear 500ms..10s", "progress:", "40% copying", "result:"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs show of a running job lacks %q:\n%s", want, out)
		}
	}
	if _, err := c.Complete(t.Context(), "a", client.Result{ID: id, Attempt: 1, Value: raw(map[string]int{"rows": 5})}); err != nil {
		t.Fatal(err)
	}
	if out := show(); !strings.Contains(out, `{"rows":5}`) {
		t.Errorf("jobs show of a finished job lacks its result:\n%s", out)
	}
}
