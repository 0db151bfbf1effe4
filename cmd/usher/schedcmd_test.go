package main

import (
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
)

// Scheduling from the CLI: jobs submit with --run-at, --delay and
// --deadline, jobs ls --state scheduled, jobs run, and flag errors that
// say what is wrong before anything is sent.
func TestCLIScheduledJobs(t *testing.T) {
	srv, c := agentServer(t, "q")
	t.Setenv("USHER_SERVER", srv.URL)
	t.Setenv("USHER_TOKEN", srv.AdminToken)
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	deadline := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	first, _, err := runCLI(t, "", "jobs", "submit", "q", "--run-at", at, "--deadline", deadline)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := runCLI(t, "", "enqueue", "q", "--delay", "10m")
	if err != nil {
		t.Fatal(err)
	}
	first, second = strings.TrimSpace(first), strings.TrimSpace(second)
	out, _, err := runCLI(t, "", "jobs", "ls", "--state", "scheduled")
	if err != nil || !strings.Contains(out, first) || !strings.Contains(out, second) || !strings.Contains(out, "scheduled") {
		t.Fatalf("jobs ls --state scheduled: %q, %v", out, err)
	}
	out, _, err = runCLI(t, "", "jobs", "show", first)
	if err != nil || !strings.Contains(out, "run at:") || !strings.Contains(out, "deadline:") {
		t.Fatalf("jobs show: %q, %v", out, err)
	}
	if out, _, err := runCLI(t, "", "jobs", "run", second); err != nil || !strings.Contains(out, "queued") {
		t.Fatalf("jobs run: %q, %v", out, err)
	}
	if _, _, err := runCLI(t, "", "jobs", "run", second); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("jobs run of a queued job: %v; want a 409", err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"jobs", "submit", "q", "--run-at", "tomorrow"}, `--run-at "tomorrow" is not an RFC 3339 time`},
		{[]string{"jobs", "submit", "q", "--deadline", "2030-01-01"}, "--deadline"},
		{[]string{"jobs", "submit", "q", "--delay", "-1s"}, "--delay -1s is negative"},
		{[]string{"jobs", "submit", "q", "--delay", "1s", "--run-at", at}, "not both"},
		{[]string{"jobs", "submit", "q", "--delay", "9000h"}, "jobs[0].delayMs"},
	} {
		if _, _, err := runCLI(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: %v; want an error mentioning %q", tc.args, err, tc.err)
		}
	}
	if p, err := c.Jobs(t.Context(), client.JobFilter{Queue: "q"}); err != nil || len(p.Jobs) != 2 {
		t.Fatalf("jobs %+v, %v; want the two submitted", p, err)
	}
}
