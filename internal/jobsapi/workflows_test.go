package jobsapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/jobtype"
)

// shellAgent runs each job's payload as a shell command in dir.
func shellAgent(dir string) func(leasedJob) (int, string) {
	return func(j leasedJob) (int, string) {
		cmd := exec.Command("sh", "-ec", j.Payload.(string))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			return 127, err.Error()
		}
		return 0, string(out)
	}
}

// A workflow (docs/design.md, "Workflows"): a diamond a → {b, c} → d
// whose jobs write files that the jobs after them read, run by several
// agents: d sees what b and c made of a's output, so each ran after the
// jobs it depends on.
func TestDiamondPassesFilesDownstream(t *testing.T) {
	s := jobsapitest.Start(t)
	dir := t.TempDir()
	queue(t, s, map[string]any{"name": "etl"})
	wf := mustAs[jobtype.SubmittedWorkflow](t, s, "POST", "/v1/workflows", map[string]any{"name": "diamond", "jobs": []any{
		map[string]any{"name": "d", "queue": "etl", "payload": `cat b.txt c.txt > d.txt`, "after": []string{"b", "c"}},
		map[string]any{"name": "b", "queue": "etl", "payload": `read x < a.txt; echo $((x + 1)) > b.txt`},
		map[string]any{"name": "c", "queue": "etl", "payload": `read x < a.txt; echo $((x * 10)) > c.txt`},
		map[string]any{"name": "a", "queue": "etl", "payload": `echo 4 > a.txt`},
	}, "edges": []any{
		map[string]any{"from": "a", "to": "b"}, map[string]any{"from": "a", "to": "c"},
		map[string]any{"from": "a", "to": "b"}, // a duplicate counts once
	}}, 201)
	stop := runAgents(t, s, 2, 2, shellAgent(dir))
	defer stop()
	testwait.Eventually(t, 30*time.Second, func() bool {
		return mustAs[jobtype.Workflow](t, s, "GET", "/v1/workflows/"+wf.ID, nil, 200).State != "running"
	}, "the workflow left the running state")
	got := mustAs[jobtype.Workflow](t, s, "GET", "/v1/workflows/"+wf.ID, nil, 200)
	if got.State != "succeeded" {
		t.Fatalf("workflow = %v; want succeeded", got)
	}
	data, err := os.ReadFile(filepath.Join(dir, "d.txt"))
	if err != nil || string(data) != "5\n40\n" {
		t.Fatalf("d.txt = %q, %v; want b's 5 and c's 40", data, err)
	}
	checkIdle(t, s)
}

// A job that fails past its retries cancels the jobs after it, except one
// that runs after failures; the workflow ends failed.
func TestFailureCancelsDependants(t *testing.T) {
	s := jobsapitest.Start(t)
	dir := t.TempDir()
	queue(t, s, map[string]any{"name": "etl", "retry": map[string]any{"maxAttempts": 2}})
	wf := mustAs[jobtype.SubmittedWorkflow](t, s, "POST", "/v1/workflows", map[string]any{"jobs": []any{
		map[string]any{"name": "extract", "queue": "etl", "payload": `echo broken >&2; exit 3`},
		map[string]any{"name": "load", "queue": "etl", "payload": `touch load.txt`, "after": []string{"extract"}},
		map[string]any{"name": "report", "queue": "etl", "payload": `touch report.txt`, "after": []string{"load"}},
		map[string]any{"name": "cleanup", "queue": "etl", "payload": `touch cleanup.txt`, "after": []string{"extract"}, "runAfterFailure": true},
	}}, 201)
	ids := wf.Jobs
	stop := runAgents(t, s, 1, 1, shellAgent(dir))
	defer stop()
	testwait.Eventually(t, 30*time.Second, func() bool {
		return mustAs[jobtype.Workflow](t, s, "GET", "/v1/workflows/"+wf.ID, nil, 200).State != "running"
	}, "the workflow left the running state")
	want := map[string]jobtype.State{"extract": jobtype.StateFailed, "load": jobtype.StateCancelled,
		"report": jobtype.StateCancelled, "cleanup": jobtype.StateSucceeded}
	for name, state := range want {
		job := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+ids[name], nil, 200)
		if job.State != state {
			t.Errorf("%s: state %v; want %s", name, job.State, state)
		}
		if name == "extract" && (job.Attempt != 2 || !strings.Contains(job.Output, "broken")) {
			t.Errorf("extract = %v; want 2 attempts and its output kept", job)
		}
	}
	for _, f := range []string{"load.txt", "report.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s exists: a cancelled job ran", f)
		}
	}
	checkIdle(t, s)
}
