package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/usherhq/usher/jobtype"
)

// What a Handler can say beside success and failure (docs/agents.md,
// "What a handler can say"): return Snooze(d) to run the job again after
// d without counting the attempt, or CancelJob(err) to fail it for good;
// call ReportProgress to show how far it got and SetResult to keep a JSON
// result with the job.

// taskKey is the context key of a running job's task.
type taskKey struct{}

// snoozeError is what Snooze returns.
type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.d) }

// Snooze is a Handler's error that puts its job back to run again after
// d (at least 1 ms), not counted as an attempt.
func Snooze(d time.Duration) error { return &snoozeError{d: d} }

// cancelError is what CancelJob returns.
type cancelError struct{ err error }

func (e *cancelError) Error() string { return e.err.Error() }
func (e *cancelError) Unwrap() error { return e.err }

// CancelJob is a Handler's error that fails its job for good: no retry,
// whatever its retry policy says. The job ends failed with err's text
// (or "cancelled by its handler" when err is nil).
func CancelJob(err error) error {
	if err == nil {
		err = errors.New("cancelled by its handler")
	}
	return &cancelError{err: err}
}

// ErrNotAJob is returned by ReportProgress and SetResult called with a
// context that is not a running job's.
var ErrNotAJob = errors.New("the context is not a running job's (pass the Handler's ctx)")

func taskOf(ctx context.Context) (*task, error) {
	t, _ := ctx.Value(taskKey{}).(*task)
	if t == nil {
		return nil, ErrNotAJob
	}
	return t, nil
}

// ReportProgress tells the server how far the Handler's job got: value
// from 0 to 1 and a short message (at most 256 bytes). The server keeps
// the latest report with the job. It returns the server's error, if any;
// a job that no longer runs is not an error.
func ReportProgress(ctx context.Context, value float64, message string) error {
	t, err := taskOf(ctx)
	if err != nil {
		return err
	}
	_, err = t.run.w.Client.Progress(ctx, ProgressRequest{Agent: t.run.agent, ID: t.job.ID,
		Attempt: t.job.Attempt, Value: value, Message: message})
	if err != nil {
		return fmt.Errorf("job %s: progress: %w", t.job.ID, err)
	}
	return nil
}

// SetResult keeps v, as JSON, as the Handler's job's result: it is
// reported with the job's end and shown as the job's "result". A later
// call replaces it.
func SetResult(ctx context.Context, v any) error {
	t, err := taskOf(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("job %s: result: %w", t.job.ID, err)
	}
	if len(b) > jobtype.MaxResult {
		return fmt.Errorf("job %s: result of %d bytes is over the limit of %d", t.job.ID, len(b), jobtype.MaxResult)
	}
	t.mu.Lock()
	t.result = b
	t.mu.Unlock()
	return nil
}
