package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
)

// A scheduled job through the client: submitted with RunAt, DelayMs or a
// Deadline, listed by state, run now with RunNow (409 for a job that is
// not waiting for its time), and refused with a 400 naming the field.
func TestClientScheduledJobs(t *testing.T) {
	srv := jobsapitest.Start(t)
	ctx := t.Context()
	c := client.New(srv.URL, srv.AdminToken)
	if _, err := c.CreateQueue(ctx, client.QueueSpec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	deadline := at.Add(time.Hour)
	ids, err := c.Enqueue(ctx, client.JobSpec{Queue: "q", RunAt: &at, Deadline: &deadline},
		client.JobSpec{Queue: "q", DelayMs: 60_000}, client.JobSpec{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Job(ctx, ids[0])
	if err != nil || j.State != client.StateScheduled || !j.RunAt.Equal(at) || !j.Deadline.Equal(deadline) {
		t.Fatalf("job %+v, %v; want scheduled at %v, deadline %v", j, err, at, deadline)
	}
	page, err := c.Jobs(ctx, client.JobFilter{State: client.StateScheduled})
	if err != nil || len(page.Jobs) != 2 || page.Jobs[0].ID != ids[0] || page.Jobs[1].ID != ids[1] {
		t.Fatalf("scheduled jobs %+v, %v; want %v", page.Jobs, err, ids[:2])
	}
	if j, err := c.RunNow(ctx, ids[1]); err != nil || j.State != client.StateQueued {
		t.Fatalf("RunNow: %+v, %v; want queued", j, err)
	}
	var ce *client.Error
	if _, err := c.RunNow(ctx, ids[2]); !errors.As(err, &ce) || ce.Status != 409 {
		t.Fatalf("RunNow of a queued job: %v; want a 409", err)
	}
	if _, err := c.Enqueue(ctx, client.JobSpec{Queue: "q", DelayMs: -1}); !errors.As(err, &ce) || ce.Status != 400 || ce.Message != "jobs[0].delayMs: -1 is negative" {
		t.Fatalf("negative delay: %v; want a 400 naming jobs[0].delayMs", err)
	}
}
