package jobs

import (
	"context"
	"fmt"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// restore rebuilds the core from the store: queues, limits, then every
// unfinished job in id order with its unfinished dependencies, in one
// atomic submission. A job waiting out a retry's backoff goes on waiting.
// A job that was running when the server stopped runs again with the next
// attempt number, so that its agent's late report of the interrupted
// attempt is ignored; a server crash does not cost the job an attempt of
// its retry policy (the rerun comes on top).
func (e *Engine) restore(ctx context.Context) error {
	snap, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("jobs: loading state: %w", err)
	}
	for _, q := range snap.Queues {
		q = normalQueue(q)
		spec, err := coreQueue(q)
		if err == nil {
			err = e.core.DefineQueue(spec)
		}
		if err != nil {
			return fmt.Errorf("jobs: restoring queue %q: %w", q.Name, err)
		}
		e.queues[q.Name] = q
	}
	for _, l := range snap.Limits {
		rate, err := coreRate(&l)
		if err == nil {
			err = e.applyLimitLocked(l, rate)
		}
		if err != nil {
			return fmt.Errorf("jobs: restoring limit %q: %w", l.Pattern, err)
		}
	}
	e.nextJob, e.nextWF = max(snap.NextJob, 1), max(snap.NextWorkflow, 1)
	if err := e.restoreJobs(snap.Jobs); err != nil {
		return err
	}
	e.mu.Lock()
	if err := e.restoreCrons(snap.Crons); err != nil {
		e.mu.Unlock()
		return err
	}
	e.restoreDedupLocked(snap.Keys)
	return e.commit(ctx)
}

func (e *Engine) restoreJobs(recs []Record) error {
	specs := make([]sched.JobSpec, 0, len(recs))
	var edges []sched.Edge
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		sp := r.Spec
		cs := sched.JobSpec{ID: jobID(r.ID), Queue: sp.Queue, Priority: sp.Priority, Keys: sp.Keys,
			Group: sp.Group, RunAfterFailure: sp.RunAfterFailure, Attempts: r.Attempt}
		runAt := restoreSchedule(r, &cs)
		if err := e.checkBasics(&sp, &cs); err != nil {
			return fmt.Errorf("jobs: restoring job %d: %w", r.ID, err)
		}
		after := make([]string, len(r.After))
		for k, d := range r.After {
			after[k] = jobID(d)
			edges = append(edges, sched.Edge{From: after[k], To: cs.ID})
		}
		specs = append(specs, cs)
		e.putLive(&liveJob{n: r.ID, id: cs.ID, queue: sp.Queue, payload: sp.Payload,
			timeoutMs: sp.TimeoutMs, after: after, workflow: r.Workflow, runAt: runAt})
		e.keepTrace(cs.ID, sp.Traceparent)
		if r.Attempt > 0 || runAt.IsZero() {
			e.live[cs.ID].retryAt = r.ReadyAt
			e.readied(e.live[cs.ID], r.ReadyAt)
		}
		e.addUniqueLocked(e.live[cs.ID], specUniqueKey(&sp, r.CreatedAt))
		if r.Running {
			e.emit(Op{Kind: OpRequeue, ID: r.ID, At: e.cfg.Now(), Result: &jobtype.Result{ID: cs.ID, Attempt: r.Attempt,
				ExitCode: -1, Error: "the server stopped while the job ran"}})
		}
	}
	if len(specs) == 0 {
		return nil
	}
	if err := e.core.SubmitWorkflow(specs, edges); err != nil {
		return fmt.Errorf("jobs: restoring %d unfinished jobs: %w", len(specs), err)
	}
	return nil
}
