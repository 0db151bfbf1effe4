package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/internal/testbin"
	"github.com/usherhq/usher/internal/testwait"
)

// In multi-node mode the leading scheduler exports the generic jobs' wait
// and run time histograms and outcomes: a job run through its /v1 shows
// at its /metrics.
func TestSchedulerExportsJobsHistograms(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	keys := redisq.NewKeys("{m}:")
	ctx, cancel := context.WithCancel(t.Context())
	root := newRootCommand()
	stderr := &testbin.LogBuffer{}
	root.SetErr(stderr)
	const admin = "usher_cmd-test-admin-token"
	root.SetArgs([]string{"scheduler", "--redis", srv.URL(), "--redis-prefix", "{m}:", "--node", "n1",
		"--listen", "127.0.0.1:0", "--admin-token", admin})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := testwait.Receive(t, 30*time.Second, done, "the scheduler command's return"); err != nil {
			t.Error(err)
		}
	}()
	testwait.Eventually(t, 10*time.Second, func() bool { return rdb.Get(t.Context(), keys.SchedulerAPI()).Val() != "" },
		"the scheduler serving /v1; log:\n%s", stderr)
	m := regexp.MustCompile(`/v1 listening.* addr=(\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no listen address in the log:\n%s", stderr.String())
	}
	base := "http://" + m[1]
	c := client.New(base, admin)
	if _, err := c.CreateQueue(ctx, client.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, client.JobSpec{Queue: "q"}, client.JobSpec{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	ans, err := c.Lease(ctx, client.LeaseRequest{Agent: "a", Slots: 2})
	if err != nil || len(ans.Jobs) != 2 {
		t.Fatalf("lease: %v, %v", ans, err)
	}
	if _, err := c.Complete(ctx, "a", client.Result{ID: ans.Jobs[0].ID, Attempt: ans.Jobs[0].Attempt},
		client.Result{ID: ans.Jobs[1].ID, Attempt: ans.Jobs[1].Attempt, ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	metrics := scrape(t, base+"/metrics")
	for _, want := range []string{`usher_jobs_queue_wait_seconds_count{queue="q"} 2`, `usher_jobs_run_seconds_count{queue="q"} 2`,
		`usher_jobs_outcomes_total{outcome="succeeded",queue="q"} 1`, `usher_jobs_outcomes_total{outcome="failed",queue="q"} 1`} {
		if !strings.Contains(metrics, "\n"+want+"\n") {
			t.Fatalf("/metrics of the leader has no %s:\n%s", want, metrics)
		}
	}
}
