package service

import (
	"io"
	"strings"
	"testing"

	jobsclient "github.com/usherhq/usher/client"
)

// A job run through /v1 shows in /metrics: its queue wait and run time
// histograms and its outcome, by queue.
func TestJobsMetricsShowAJobsWaitRunAndOutcome(t *testing.T) {
	ts := startService(t, 0, nil)
	ctx := t.Context()
	c := jobsclient.New(ts.srv.URL, ts.admin)
	if _, err := c.CreateQueue(ctx, jobsclient.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, jobsclient.JobSpec{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	ans, err := c.Lease(ctx, jobsclient.LeaseRequest{Agent: "a", Slots: 1})
	if err != nil || len(ans.Jobs) != 1 {
		t.Fatalf("lease: %v, %v", ans, err)
	}
	if _, err := c.Complete(ctx, "a", jobsclient.Result{ID: ans.Jobs[0].ID, Attempt: ans.Jobs[0].Attempt}); err != nil {
		t.Fatal(err)
	}
	resp := ts.adminGet(t, ctx, "/metrics")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`usher_jobs_queue_wait_seconds_count{queue="q"} 1`, `usher_jobs_run_seconds_count{queue="q"} 1`,
		`usher_jobs_outcomes_total{outcome="succeeded",queue="q"} 1`, `usher_jobs_outcomes_total{outcome="failed",queue="q"} 0`} {
		if !strings.Contains(string(body), "\n"+want+"\n") {
			t.Fatalf("/metrics has no %s:\n%s", want, body)
		}
	}
}
