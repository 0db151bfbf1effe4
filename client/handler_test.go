package client_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/testwait"
)

// A Handler snoozes its job (not counted as an attempt), reports
// progress that the server shows while the job runs, and returns a
// result kept with the job.
func TestWorkerHandlerSnoozesReportsProgressAndResult(t *testing.T) {
	_, c := setup(t)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "q", Retry: &client.RetryPolicy{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	reported, finish := make(chan struct{}), make(chan struct{})
	w := &client.Worker{Client: c, WaitMs: 100, Handlers: map[string]client.Handler{
		"q": func(ctx context.Context, j *client.LeasedJob) (string, error) {
			if runs.Add(1) == 1 {
				return "", client.Snooze(10 * time.Millisecond)
			}
			if err := client.ReportProgress(ctx, 0.5, "half way"); err != nil {
				return "", err
			}
			close(reported)
			<-finish
			if err := client.SetResult(ctx, map[string]int{"rows": 7}); err != nil {
				return "", err
			}
			return "done", nil
		},
	}}
	id := enqueue(t, c, client.JobSpec{Queue: "q"})[0]
	runWorker(t, w)
	testwait.Receive(t, 30*time.Second, reported, "the handler reporting progress")
	j, err := c.Job(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != client.StateRunning || j.Progress == nil || j.Progress.Value != 0.5 || j.Progress.Message != "half way" {
		t.Fatalf("running job = %s progress %+v; want running at 0.5 \"half way\"", j.State, j.Progress)
	}
	close(finish)
	j = waitJob(t, c, id, finished)
	if j.State != client.StateSucceeded || j.Attempt != 1 || string(j.Result) != `{"rows":7}` || runs.Load() != 2 {
		t.Fatalf("job = %s attempt %d result %s after %d runs; want succeeded at attempt 1 (the snooze not counted) with {\"rows\":7} after 2 runs",
			j.State, j.Attempt, j.Result, runs.Load())
	}
}

// A Handler that cancels its job ends it failed with its error, although
// its policy would retry it.
func TestWorkerHandlerCancelsItsJob(t *testing.T) {
	_, c := setup(t)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "q", Retry: &client.RetryPolicy{MaxAttempts: 5}}); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	w := &client.Worker{Client: c, WaitMs: 100, Default: func(context.Context, *client.LeasedJob) (string, error) {
		runs.Add(1)
		return "", client.CancelJob(errors.New("the input names no file"))
	}}
	id := enqueue(t, c, client.JobSpec{Queue: "q"})[0]
	runWorker(t, w)
	j := waitJob(t, c, id, finished)
	if j.State != client.StateFailed || j.Error != "the input names no file" || j.Attempt != 1 || runs.Load() != 1 {
		t.Fatalf("job = %s %q attempt %d after %d runs; want failed with the handler's error after one run", j.State, j.Error, j.Attempt, runs.Load())
	}
}

// ReportProgress and SetResult need a running job's context.
func TestHandlerHelpersNeedAJobContext(t *testing.T) {
	if err := client.ReportProgress(context.Background(), 0.1, ""); !errors.Is(err, client.ErrNotAJob) {
		t.Fatalf("ReportProgress outside a job = %v, want ErrNotAJob", err)
	}
	if err := client.SetResult(context.Background(), 1); !errors.Is(err, client.ErrNotAJob) {
		t.Fatalf("SetResult outside a job = %v, want ErrNotAJob", err)
	}
}

// The server fails an attempt that runs past its time limit and grace
// although the worker is alive and renewing (here its handler ignores its
// context and the worker waits long for it): the engine's clock loop wakes
// at that deadline, the job is retried by its policy, and the worker hears
// to stop it.
func TestServerTimeLimitOverALiveWorker(t *testing.T) {
	_, c := setup(t)
	if _, err := c.CreateQueue(t.Context(), client.QueueSpec{Name: "q", Retry: &client.RetryPolicy{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	w := &client.Worker{Client: c, WaitMs: 100, Grace: time.Minute, RenewInterval: 200 * time.Millisecond,
		Default: func(context.Context, *client.LeasedJob) (string, error) {
			<-release // ignores its context
			return "", nil
		}}
	id := enqueue(t, c, client.JobSpec{Queue: "q", TimeoutMs: 100})[0]
	start := time.Now()
	runWorker(t, w)
	j := waitJob(t, c, id, finished)
	took := time.Since(start)
	if j.State != client.StateFailed || !strings.Contains(j.Error, "time limit") {
		t.Fatalf("job = %s %q; want failed by the server's time limit", j.State, j.Error)
	}
	if took < 5*time.Second {
		t.Fatalf("failed after %s, before the limit and its grace (100 ms + 5 s)", took)
	}
}
