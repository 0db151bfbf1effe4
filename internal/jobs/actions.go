package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/usherhq/usher/jobtype"
)

// Delete deletes a job: a finished one at once; a queued, waiting,
// scheduled or delayed one is cancelled first (its dependants with it,
// as a cancel does). A running job is not deleted: its agent holds it,
// and it must be cancelled and end first.
func (e *Engine) Delete(ctx context.Context, id string) error {
	n, err := parseID("", id)
	if err != nil {
		return err
	}
	if _, err := e.store.Job(ctx, n); err != nil {
		return err
	}
	return e.change(ctx, func() error {
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
	})
}

// MaxActionBatch caps the jobs one bulk action changes.
const MaxActionBatch = 1000

// actionWorkers is how many jobs a bulk action changes at once: their
// writes share the store's commits.
const actionWorkers = 16

// Act applies action to each job of ids and says how many it changed
// and why the others were not.
func (e *Engine) Act(ctx context.Context, action string, ids []string) (changed int, failed []jobtype.ActionError, err error) {
	do, err := e.action(action)
	if err != nil {
		return 0, nil, err
	}
	if len(ids) > MaxActionBatch {
		return 0, nil, invalid("ids", "%d jobs, over the limit of %d a request", len(ids), MaxActionBatch)
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(actionWorkers, len(ids)) {
		wg.Go(func() {
			for i := range next {
				errs[i] = do(ctx, ids[i])
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	failed = []jobtype.ActionError{}
	for i, err := range errs {
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

// action is what a bulk action does to one job.
func (e *Engine) action(name string) (func(context.Context, string) error, error) {
	drop := func(f func(context.Context, string) (jobtype.Job, error)) func(context.Context, string) error {
		return func(ctx context.Context, id string) error {
			_, err := f(ctx, id)
			return err
		}
	}
	switch name {
	case jobtype.ActionRetry:
		return drop(e.Retry), nil
	case jobtype.ActionCancel:
		return drop(e.Cancel), nil
	case jobtype.ActionRun:
		return drop(e.RunNow), nil
	case jobtype.ActionDelete:
		return e.Delete, nil
	}
	return nil, invalid("action", "%q is not retry, cancel, run or delete", name)
}
