package client

import (
	"context"
	"fmt"
	"time"
)

// Two ways a Worker's Run ends by itself (Worker.ExitWhenIdle,
// Worker.UntilWorkflow), both as a graceful stop: no more work is fetched,
// running jobs finish and are reported, the agent leaves, Run returns nil.

// active records that the worker had work just now.
func (r *run) active() { r.lastActive.Store(time.Now().UnixNano()) }

// idleLeft returns how much longer the worker may stay without work under
// ExitWhenIdle, and false when it has been idle that long already. Without
// ExitWhenIdle, or while jobs run, it returns max, true.
func (r *run) idleLeft(max time.Duration) (time.Duration, bool) {
	if r.w.ExitWhenIdle <= 0 {
		return max, true
	}
	if r.count() > 0 {
		r.active()
		return max, true
	}
	left := r.w.ExitWhenIdle - time.Since(time.Unix(0, r.lastActive.Load()))
	if left <= 0 {
		return 0, false
	}
	return min(left, max), true
}

// leaseWait is the WaitMs of the next lease request: the worker's wait,
// cut so that an idle worker asks again when its ExitWhenIdle runs out;
// ok is false when it has run out.
func (r *run) leaseWait() (ms int64, ok bool) {
	left, ok := r.idleLeft(time.Duration(r.wait) * time.Millisecond)
	if !ok {
		r.log.Info("worker: no work for a while; stopping", "exitWhenIdle", r.w.ExitWhenIdle)
		return 0, false
	}
	if r.wait == 0 {
		return 0, true
	}
	return max(left.Milliseconds(), 1), true
}

// watchWorkflow calls stop once the workflow UntilWorkflow has finished,
// retrying failed calls that may succeed later; it returns the error of
// one that cannot (an unknown workflow), after calling stop too. It
// returns nil when ctx ends first.
func (r *run) watchWorkflow(ctx context.Context, stop func()) error {
	defer stop()
	for fails := 0; ; fails++ {
		wf, err := r.w.Client.WaitWorkflow(ctx, r.w.UntilWorkflow)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			r.log.Info("worker: the workflow finished; stopping", "workflow", wf.ID, "state", wf.State)
			return nil
		case !retryable(err):
			r.log.Error("worker: cannot wait for the workflow", "workflow", r.w.UntilWorkflow, "err", err)
			return fmt.Errorf("worker %s: waiting for workflow %s: %w", r.agent, r.w.UntilWorkflow, err)
		}
		d := backoff(fails, r.maxBackoff)
		r.log.Warn("worker: waiting for the workflow failed; backing off", "err", err, "wait", d)
		if !sleep(ctx, d) {
			return nil
		}
	}
}

// confirmStart tells the server that the job of a strict-start queue
// started (its handler is being called), so that the queue's next job may
// go out; it retries calls
// that may succeed later until the job's context ends. Should it not get
// through, the job runs all the same: the gate opens when it ends.
func (r *run) confirmStart(t *task) {
	for fails := 0; ; fails++ {
		_, err := r.w.Client.Started(t.ctx, r.agent, t.job.ID, t.job.Attempt)
		if err == nil || t.ctx.Err() != nil {
			return
		}
		if !retryable(err) || fails >= 5 {
			r.log.Warn("worker: could not confirm a job's start", "job", t.job.ID, "err", err)
			return
		}
		if !sleep(t.ctx, backoff(fails, r.maxBackoff)) {
			return
		}
	}
}
