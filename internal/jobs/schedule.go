package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// Scheduled jobs and deadlines (docs/design.md, "Scheduled jobs and
// deadlines"). A job's runAt (or delayMs, stored as runAt) holds its
// first run back; the core keeps it in its delayed heap, so the clock
// loop sleeps until the earliest due time or deadline and nothing polls.
// The due time is durable in the job's stored spec; RunNow and Retry,
// which make a job ready before it, write the time they did so as the
// job's ready time (Record.ReadyAt), which then wins at a restart.

// ScheduleHorizon is how far ahead runAt, delayMs and deadline may lie.
const ScheduleHorizon = 365 * 24 * time.Hour

// DeadlinePassed is the error of a job discarded at its deadline.
const DeadlinePassed = "deadline passed: the job had not started by its deadline"

// checkSchedule validates a new job's runAt, delayMs and deadline,
// resolves delayMs into runAt, and sets the core's due time and deadline.
func checkSchedule(sp *jobtype.JobSpec, cs *sched.JobSpec, now time.Time) error {
	limit := now.Add(ScheduleHorizon)
	switch {
	case sp.DelayMs < 0:
		return invalid("delayMs", "%d is negative", sp.DelayMs)
	case sp.DelayMs != 0 && sp.RunAt != nil:
		return invalid("delayMs", "give runAt or delayMs, not both")
	case sp.DelayMs > ScheduleHorizon.Milliseconds():
		return invalid("delayMs", "%d is beyond the horizon of %s", sp.DelayMs, horizonText)
	case sp.RunAt != nil && sp.RunAt.After(limit):
		return invalid("runAt", "%s is beyond the horizon of %s", sp.RunAt.Format(time.RFC3339), horizonText)
	}
	if sp.DelayMs > 0 {
		at := now.Add(time.Duration(sp.DelayMs) * time.Millisecond)
		sp.RunAt, sp.DelayMs = &at, 0
	}
	due := now
	if sp.RunAt != nil {
		cs.NotBefore = *sp.RunAt
		due = later(now, *sp.RunAt)
	}
	if sp.Deadline == nil {
		return nil
	}
	switch d := *sp.Deadline; {
	case !d.After(now):
		return invalid("deadline", "%s has passed", d.Format(time.RFC3339Nano))
	case !d.After(due):
		return invalid("deadline", "%s is not after the job's due time %s", d.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano))
	case d.After(limit):
		return invalid("deadline", "%s is beyond the horizon of %s", d.Format(time.RFC3339), horizonText)
	}
	cs.Deadline = *sp.Deadline
	return nil
}

// horizonText names ScheduleHorizon in errors.
var horizonText = fmt.Sprintf("%d days", int(ScheduleHorizon.Hours()/24))

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// restoreSchedule sets a restored job's due time and deadline, and
// returns its runAt while it is scheduled. A job with no counted attempt
// waits for its stored ready time if RunNow, Retry or a snooze wrote one
// (shown as delayed), else for its runAt (scheduled); its deadline holds
// unless it was readied after it (a retry of a job discarded at its
// deadline). A job with a counted attempt is past both: it waits only for
// a retry's backoff.
func restoreSchedule(r *Record, cs *sched.JobSpec) (runAt time.Time) {
	cs.NotBefore = r.ReadyAt
	if r.Attempt > 0 {
		return time.Time{}
	}
	if r.ReadyAt.IsZero() && r.Spec.RunAt != nil {
		cs.NotBefore = *r.Spec.RunAt
	}
	if dl := r.Spec.Deadline; dl != nil && (r.ReadyAt.IsZero() || r.ReadyAt.Before(*dl)) {
		cs.Deadline = *dl
	}
	if !r.ReadyAt.IsZero() {
		// readied again before a counted attempt (run now, a retry, a
		// snooze): it waits as a retry does, not for its runAt
		return time.Time{}
	}
	return cs.NotBefore
}

// RunNow makes a scheduled job, or one waiting out a retry's backoff,
// ready now (docs/api.md, "POST /v1/jobs/{id}/run"). Any other job is a
// conflict.
func (e *Engine) RunNow(ctx context.Context, id string) (jobtype.Job, error) {
	n, err := parseID("", id)
	if err != nil {
		return jobtype.Job{}, err
	}
	err = e.change(ctx, func() error {
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
	})
	if errors.Is(err, errNotLive) {
		return jobtype.Job{}, e.finishedConflict(ctx, n, "run now") // read outside the lock
	}
	if err != nil {
		return jobtype.Job{}, err
	}
	return e.Job(ctx, id)
}

// expired records a job discarded at its deadline.
func (e *Engine) expired(id string, at time.Time) {
	e.finished(id, jobtype.StateCancelled, at, &jobtype.Result{ID: id, ExitCode: -1, Error: DeadlinePassed})
}
