package jobs

import (
	"context"
	"slices"
	"time"

	"github.com/usherhq/usher/jobtype"
)

// MaxWorkflowWait is the longest one GET /v1/workflows/{id}?wait= waits
// for the workflow to finish; a longer wait is cut to it.
const MaxWorkflowWait = 60 * time.Second

// wfWatch tells who waits for a workflow to finish when it does: the
// engine counts each workflow's unfinished jobs, and the finish of the
// last one wakes the waiters. Nothing polls.
type wfWatch struct {
	live    map[int64]int             // unfinished jobs per workflow
	waiters map[int64][]chan struct{} // closed when the workflow finishes
}

// putLive records an unfinished job beside the core.
func (e *Engine) putLive(j *liveJob) {
	e.live[j.id] = j
	e.watchDeps(j)
	if j.workflow == 0 {
		return
	}
	if e.wf.live == nil {
		e.wf.live = map[int64]int{}
	}
	e.wf.live[j.workflow]++
}

// liveGone counts a job of a workflow that finished, and wakes the
// workflow's waiters when it was the last.
func (e *Engine) liveGone(j *liveJob) {
	if j.workflow == 0 {
		return
	}
	if e.wf.live[j.workflow]--; e.wf.live[j.workflow] > 0 {
		return
	}
	delete(e.wf.live, j.workflow)
	for _, ch := range e.wf.waiters[j.workflow] {
		close(ch)
	}
	delete(e.wf.waiters, j.workflow)
}

// wakeWorkflowWaitersLocked answers every workflow waiter at once (the
// server is shutting down).
func (e *Engine) wakeWorkflowWaitersLocked() {
	for _, chs := range e.wf.waiters {
		for _, ch := range chs {
			close(ch)
		}
	}
	e.wf.waiters = nil
}

// WaitWorkflow returns a workflow once it has finished (succeeded or
// failed), or as it is after d (at most MaxWorkflowWait) if it has not.
func (e *Engine) WaitWorkflow(ctx context.Context, id string, d time.Duration) (jobtype.Workflow, error) {
	n, err := parseID("", id)
	if err != nil {
		return jobtype.Workflow{}, notFound("", "no workflow %q", id)
	}
	d = min(max(d, 0), MaxWorkflowWait)
	e.mu.Lock()
	if d == 0 || e.draining || e.wf.live[n] == 0 {
		e.mu.Unlock()
		return e.Workflow(ctx, id)
	}
	ch := make(chan struct{})
	if e.wf.waiters == nil {
		e.wf.waiters = map[int64][]chan struct{}{}
	}
	e.wf.waiters[n] = append(e.wf.waiters[n], ch)
	e.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
		// The finish is decided; read the workflow once the store has it.
		e.mu.Lock()
		p := e.flushLocked()
		e.mu.Unlock()
		if err := waitError(p.Wait(ctx)); err != nil {
			return jobtype.Workflow{}, err
		}
	case <-timer.C:
		e.leaveWorkflowWait(n, ch)
	case <-ctx.Done():
		e.leaveWorkflowWait(n, ch)
		return jobtype.Workflow{}, ctx.Err()
	}
	return e.Workflow(ctx, id)
}

// leaveWorkflowWait takes a waiter that gave up out of the list.
func (e *Engine) leaveWorkflowWait(n int64, ch chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	chs := e.wf.waiters[n]
	if i := slices.Index(chs, ch); i >= 0 {
		chs = slices.Delete(chs, i, i+1)
		if len(chs) == 0 {
			delete(e.wf.waiters, n)
		} else {
			e.wf.waiters[n] = chs
		}
	}
}
