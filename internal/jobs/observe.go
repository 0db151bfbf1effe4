package jobs

import (
	"time"

	"github.com/usherhq/usher/jobtype"
)

// Observing jobs for metrics (docs/operations.md, "Metrics"): the engine
// tells an Observer of each attempt's start, with how long the job waited
// for it, and of each outcome, with how long the attempt ran. It keeps
// beside each unfinished job when it became ready and when its attempt
// started; with no Observer it keeps nothing more.

// Outcome is how an attempt or an unfinished job ended, as an Observer
// learns it.
type Outcome uint8

// Outcomes. Retried and Snoozed end an attempt, not the job; Cancelled
// and Discarded may end a job that never started.
const (
	// OutcomeSucceeded: the attempt succeeded; the job is done.
	OutcomeSucceeded Outcome = iota
	// OutcomeFailed: the job failed for good: its last attempt failed,
	// ran past its time limit or lost its agent, or its handler cancelled
	// it.
	OutcomeFailed
	// OutcomeRetried: the attempt failed (or ran past its time limit, or
	// lost its agent) and the job runs again after its backoff.
	OutcomeRetried
	// OutcomeCancelled: the job was cancelled (by a client, its queue's
	// removal, or a dependency that failed), running or not.
	OutcomeCancelled
	// OutcomeSnoozed: the handler snoozed the attempt; the job runs again
	// later and the attempt does not count.
	OutcomeSnoozed
	// OutcomeDiscarded: the job had not started by its deadline.
	OutcomeDiscarded
	// NumOutcomes is the number of outcomes, for tables indexed by them.
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{"succeeded", "failed", "retried", "cancelled", "snoozed", "discarded"}

// String names the outcome as the metrics label it.
func (o Outcome) String() string {
	if o < NumOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Observer learns of generic jobs' attempts as the engine decides them.
// The engine calls it with its lock held: it must be quick, must not
// block and must not call the engine.
type Observer interface {
	// Started: an attempt of a job of queue started, wait after the job
	// became ready (enqueued, due, its backoff or snooze over, its
	// dependencies done).
	Started(queue string, wait time.Duration)
	// Ended: an attempt or an unfinished job of queue ended with outcome;
	// when an attempt was running, ran is how long it ran and running is
	// true.
	Ended(queue string, outcome Outcome, ran time.Duration, running bool)
}

// obsState is what the engine keeps for its Observer beside the live
// jobs: the jobs waiting for each unfinished dependency.
type obsState struct {
	dependants map[string][]*liveJob
}

// readied records that a job became ready at at (not before now).
func (e *Engine) readied(j *liveJob, at time.Time) {
	if e.cfg.Observer != nil {
		j.readyAt = later(e.cfg.Now(), at)
	}
}

// observeStart tells the Observer that j's attempt starts now.
func (e *Engine) observeStart(j *liveJob, now time.Time) {
	if e.cfg.Observer == nil {
		return
	}
	j.startedAt = now
	e.cfg.Observer.Started(j.queue, max(0, now.Sub(j.readyAt)))
}

// observeEnd tells the Observer how j's attempt (or j, never started)
// ended; call it before j stops running.
func (e *Engine) observeEnd(j *liveJob, o Outcome) {
	if e.cfg.Observer == nil {
		return
	}
	var ran time.Duration
	if j.running {
		ran = max(0, e.cfg.Now().Sub(j.startedAt))
	}
	e.cfg.Observer.Ended(j.queue, o, ran, j.running)
}

// finalOutcome is the outcome of a job that ends in state s with result r.
func finalOutcome(s jobtype.State, r *jobtype.Result) Outcome {
	switch {
	case s == jobtype.StateSucceeded:
		return OutcomeSucceeded
	case s == jobtype.StateFailed:
		return OutcomeFailed
	case r != nil && r.Error == DeadlinePassed:
		return OutcomeDiscarded
	}
	return OutcomeCancelled
}

// watchDeps sets a new live job's ready time (now, or its due time) and
// notes its unfinished dependencies, so that it counts as ready again
// once the last of them is done.
func (e *Engine) watchDeps(j *liveJob) {
	if e.cfg.Observer == nil {
		return
	}
	j.readyAt = later(e.cfg.Now(), j.runAt)
	for _, d := range j.after {
		if e.obs.dependants == nil {
			e.obs.dependants = map[string][]*liveJob{}
		}
		e.obs.dependants[d] = append(e.obs.dependants[d], j)
	}
}

// observeFinish tells the Observer how j ended (state s, result r) and
// readies the jobs that waited for it.
func (e *Engine) observeFinish(j *liveJob, s jobtype.State, r *jobtype.Result) {
	if e.cfg.Observer == nil {
		return
	}
	e.observeEnd(j, finalOutcome(s, r))
	now := e.cfg.Now()
	for _, d := range e.obs.dependants[j.id] {
		if e.live[d.id] == d {
			d.readyAt = later(d.readyAt, now)
		}
	}
	delete(e.obs.dependants, j.id)
}
