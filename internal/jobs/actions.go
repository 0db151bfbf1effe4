package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// The actions on jobs (docs/api.md, "Acting on many jobs"): cancel,
// retry, run now and delete, on one job or many at once. Each is a read
// outside the engine's lock, if it needs one, and a step under it; many
// jobs' steps share one change, so one commit.

// step is one job's action under the engine's lock.
type step func() error

// MaxActionBatch caps the jobs one bulk action changes.
const MaxActionBatch = 1000

// Cancel withdraws an unfinished job; a running one is told to stop at
// its agent's next renewal. Dependants are cancelled unless they run
// after failures.
func (e *Engine) Cancel(ctx context.Context, id string) (jobtype.Job, error) {
	return e.actOnOne(ctx, jobtype.ActionCancel, id)
}

// Retry queues a failed or cancelled job again with fresh attempts.
func (e *Engine) Retry(ctx context.Context, id string) (jobtype.Job, error) {
	return e.actOnOne(ctx, jobtype.ActionRetry, id)
}

// RunNow makes a scheduled job, or one waiting out a retry's backoff,
// ready now (docs/api.md, "POST /v1/jobs/{id}/run"). Any other job is a
// conflict.
func (e *Engine) RunNow(ctx context.Context, id string) (jobtype.Job, error) {
	return e.actOnOne(ctx, jobtype.ActionRun, id)
}

// Delete deletes a job: a finished one at once; a queued, waiting,
// scheduled or delayed one is cancelled first (its dependants with it,
// as a cancel does). A running job is not deleted: its agent holds it,
// and it must be cancelled and end first.
func (e *Engine) Delete(ctx context.Context, id string) error {
	return e.act(ctx, jobtype.ActionDelete, []string{id})[0]
}

// actOnOne applies an action to one job and returns the job after it.
func (e *Engine) actOnOne(ctx context.Context, action, id string) (jobtype.Job, error) {
	if err := e.act(ctx, action, []string{id})[0]; err != nil {
		return jobtype.Job{}, err
	}
	return e.Job(ctx, id)
}

// Act applies action to each job of ids, all in one change, and says how
// many it changed and why the others were not.
func (e *Engine) Act(ctx context.Context, action string, ids []string) (changed int, failed []jobtype.ActionError, err error) {
	if len(ids) > MaxActionBatch {
		return 0, nil, invalid("ids", "%d jobs, over the limit of %d a request", len(ids), MaxActionBatch)
	}
	if _, ok := actionVerbs[action]; !ok {
		return 0, nil, invalid("action", "%q is not retry, cancel, run or delete", action)
	}
	failed = []jobtype.ActionError{}
	for i, err := range e.act(ctx, action, ids) {
		switch {
		case err == nil:
			changed++
		case errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalid):
			failed = append(failed, jobtype.ActionError{ID: ids[i], Error: err.Error()})
		default:
			return changed, failed, fmt.Errorf("jobs: %s job %s: %w", action, ids[i], err)
		}
	}
	return changed, failed, nil
}

// actionVerbs say, for a conflict, what a finished job cannot be.
var actionVerbs = map[string]string{jobtype.ActionCancel: "cancelled", jobtype.ActionRetry: "retried",
	jobtype.ActionRun: "run now", jobtype.ActionDelete: "deleted"}

// act applies action to each job of ids and returns each one's error:
// the reads first, outside the lock, then every step in one change. A
// failed commit is every job's error.
func (e *Engine) act(ctx context.Context, action string, ids []string) []error {
	steps, errs := make([]step, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		steps[i], errs[i] = e.prepare(ctx, action, id)
	}
	err := e.change(ctx, func() error {
		for i := range ids {
			if errs[i] == nil {
				errs[i] = steps[i]()
			}
		}
		return nil
	})
	for i, id := range ids {
		switch {
		case err != nil && errs[i] == nil:
			errs[i] = err
		case errors.Is(errs[i], errNotLive):
			errs[i] = e.finishedConflict(ctx, mustID(id), actionVerbs[action]) // read outside the lock
		}
	}
	return errs
}

// prepare reads what an action on one job needs and returns its step.
func (e *Engine) prepare(ctx context.Context, action, id string) (step, error) {
	n, err := parseID("", id)
	if err != nil {
		return nil, err
	}
	switch action {
	case jobtype.ActionCancel:
		return func() error { return e.cancelStep(id) }, nil
	case jobtype.ActionRun:
		return func() error { return e.runNowStep(id) }, nil
	case jobtype.ActionRetry:
		return e.prepareRetry(ctx, id, n)
	case jobtype.ActionDelete:
		if _, err := e.store.Job(ctx, n); err != nil {
			return nil, err
		}
		return func() error { return e.deleteStep(id, n) }, nil
	}
	return nil, invalid("action", "%q is not retry, cancel, run or delete", action)
}

func (e *Engine) cancelStep(id string) error {
	if _, ok := e.live[id]; !ok {
		return errNotLive
	}
	return e.cancelLocked(id)
}

func (e *Engine) runNowStep(id string) error {
	j, ok := e.live[id]
	if !ok {
		return errNotLive
	}
	st := e.liveStateLocked(j)
	if st != jobtype.StateScheduled && st != jobtype.StateDelayed {
		return conflict("", "job %s is %s; only scheduled or delayed jobs can be run now", id, st)
	}
	if err := e.core.RunNow(id); err != nil {
		if errors.Is(err, sched.ErrNotDelayed) { // due this instant; the clock loop has not run yet
			return conflict("", "job %s is due already; only scheduled or delayed jobs can be run now", id)
		}
		return fmt.Errorf("jobs: run %s now: %w", id, err)
	}
	now := e.cfg.Now()
	j.runAt, j.retryAt = time.Time{}, time.Time{}
	e.readied(j, now)
	e.emit(Op{Kind: OpRequeue, ID: j.n, At: now})
	return nil
}

// prepareRetry reads a finished job outside the lock. A finished job
// changes only by a retry, which makes it live: the step's check under
// the lock catches a concurrent one.
func (e *Engine) prepareRetry(ctx context.Context, id string, n int64) (step, error) {
	old, err := e.store.Job(ctx, n)
	if err != nil {
		return nil, err
	}
	wfName, err := e.workflowName(ctx, old)
	if err != nil {
		return nil, err
	}
	return func() error {
		if j, ok := e.live[id]; ok {
			return conflict("", "job %s is %s; only failed or cancelled jobs can be retried", id, e.liveStateLocked(j))
		}
		if old.State != jobtype.StateFailed && old.State != jobtype.StateCancelled {
			return conflict("", "job %s %s; only failed or cancelled jobs can be retried", id, old.State)
		}
		return e.resubmitLocked(old, n, wfName)
	}, nil
}

func (e *Engine) deleteStep(id string, n int64) error {
	if j, ok := e.live[id]; ok {
		if j.running {
			return conflict("", "job %s is running; cancel it, and delete it once it has ended", id)
		}
		if err := e.cancelLocked(id); err != nil {
			return err
		}
	}
	e.emit(Op{Kind: OpDelete, ID: n})
	return nil
}
