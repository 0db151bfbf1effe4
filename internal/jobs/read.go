package jobs

import (
	"context"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// Job returns one job.
func (e *Engine) Job(ctx context.Context, id string) (jobtype.Job, error) {
	n, err := parseID("", id)
	if err != nil {
		return jobtype.Job{}, err
	}
	j, err := e.store.Job(ctx, n)
	if err != nil {
		return jobtype.Job{}, err
	}
	e.mu.Lock()
	e.overlayLocked(&j)
	e.mu.Unlock()
	return j, nil
}

// Jobs lists the jobs of one page, in the filter's order.
func (e *Engine) Jobs(ctx context.Context, f Filter) ([]jobtype.Job, error) {
	p, err := e.JobPage(ctx, f)
	return p.Jobs, err
}

// JobPage lists one page of jobs, in id order (newest first with
// f.Desc), and the cursor of the next. The store tells unfinished from
// finished jobs; the engine tells a waiting, scheduled, delayed or queued
// job apart, so a page filtered on one of those may end short.
func (e *Engine) JobPage(ctx context.Context, f Filter) (Page, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	want := f.State
	switch want {
	case "", jobtype.StateRunning, jobtype.StateSucceeded, jobtype.StateFailed, jobtype.StateCancelled:
	case jobtype.StateWaiting, jobtype.StateDelayed, jobtype.StateQueued, jobtype.StateScheduled:
		f.State = jobtype.StateQueued // the store keeps all four as queued
	default:
		return Page{}, invalid("state", "unknown state %q", want)
	}
	p, err := e.store.Jobs(ctx, f)
	if err != nil {
		return Page{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := p.Jobs[:0]
	for i := range p.Jobs {
		e.overlayLocked(&p.Jobs[i])
		if want == "" || p.Jobs[i].State == want {
			out = append(out, p.Jobs[i])
		}
	}
	p.Jobs = out
	return p, nil
}

// overlayLocked gives an unfinished job its state as the engine knows it.
// It also fills in the attempts the job may have.
func (e *Engine) overlayLocked(j *jobtype.Job) {
	if l := e.live[j.ID]; l != nil {
		j.State = e.liveStateLocked(l)
	}
	r := e.queues[j.Queue].Retry
	if j.Retry != nil {
		r = *j.Retry
	}
	j.MaxAttempts = max(1, r.MaxAttempts)
}

func (e *Engine) liveStateLocked(j *liveJob) jobtype.State {
	switch {
	case j.running:
		return jobtype.StateRunning
	case j.retryAt.After(e.cfg.Now()):
		return jobtype.StateDelayed
	}
	for _, d := range j.after {
		if _, ok := e.live[d]; ok {
			return jobtype.StateWaiting
		}
	}
	if j.runAt.After(e.cfg.Now()) {
		return jobtype.StateScheduled
	}
	return jobtype.StateQueued
}

// Workflow returns a workflow and its jobs.
func (e *Engine) Workflow(ctx context.Context, id string) (jobtype.Workflow, error) {
	n, err := parseID("", id)
	if err != nil {
		return jobtype.Workflow{}, notFound("", "no workflow %q", id)
	}
	name, err := e.store.WorkflowInfo(ctx, n)
	if err != nil {
		return jobtype.Workflow{}, err
	}
	w := jobtype.Workflow{ID: id, Name: name, State: "succeeded", Jobs: []jobtype.Job{}}
	for after := int64(0); ; {
		page, err := e.JobPage(ctx, Filter{Workflow: id, After: after, Limit: 1000})
		if err != nil {
			return jobtype.Workflow{}, err
		}
		w.Jobs = append(w.Jobs, page.Jobs...)
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	for _, j := range w.Jobs {
		switch {
		case !j.State.Final():
			w.State = "running"
		case j.State != jobtype.StateSucceeded && w.State == "succeeded":
			w.State = "failed"
		}
	}
	return w, nil
}

// Stats returns the current state of queues, keys, tiers and agents.
func (e *Engine) Stats() jobtype.Stats {
	e.mu.Lock()
	snap := e.core.Snapshot()
	e.mu.Unlock()
	return statsOf(snap)
}

func statsOf(snap sched.Snapshot) jobtype.Stats {
	st := jobtype.Stats{Queues: []jobtype.QueueStats{}, Keys: keyStats(snap.Keys), Groups: keyStats(snap.Groups),
		Tiers: []jobtype.TierStats{}, Agents: []jobtype.AgentStats{}}
	for _, q := range snap.Queues {
		by := q.BlockedBy
		if by == nil {
			by = map[string]int{}
		}
		st.Queues = append(st.Queues, jobtype.QueueStats{Name: q.Name, Queued: q.Queued, Running: q.Running,
			Waiting: q.Waiting, Delayed: q.Delayed, Blocked: q.Blocked, BlockedBy: by})
	}
	for _, t := range snap.Tiers {
		st.Tiers = append(st.Tiers, jobtype.TierStats{Name: t.Name, DurationMs: t.Duration.Milliseconds(),
			Running: t.Running, Counted: t.Counted, Limit: t.Limit})
	}
	for _, w := range snap.Workers {
		st.Agents = append(st.Agents, jobtype.AgentStats{ID: w.ID, Slots: w.Slots, Running: w.Running})
	}
	c := snap.Counters
	st.Counters = jobtype.Counters{Started: int64(c.Started), Succeeded: int64(c.Succeeded), Failed: int64(c.Failed),
		Retried: int64(c.Retried), Cancelled: int64(c.Cancelled), Downgrades: int64(c.Downgrades),
		LeaseExpiries: int64(c.LeaseExpiries), Snoozed: int64(c.Snoozes), TimedOut: int64(c.TimeLimits), Expired: int64(c.Expired)}
	return st
}

func keyStats(ks []sched.KeyUsage) []jobtype.KeyStats {
	out := make([]jobtype.KeyStats, len(ks))
	for i, k := range ks {
		out[i] = jobtype.KeyStats{Key: k.Key, Running: k.Running, Limit: k.Limit, Queued: k.Queued}
		if k.Rated {
			out[i].Tokens = &k.Tokens
			if !k.NextToken.IsZero() {
				out[i].NextToken = &k.NextToken
			}
		}
	}
	return out
}

// CheckInvariants checks the core's invariants (listed at the top of
// docs/design.md), for tests.
func (e *Engine) CheckInvariants() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.checkDedupLocked(); err != nil {
		return err
	}
	return e.core.CheckInvariants()
}

// Idle reports whether no job is unfinished and every counter of the core
// is back at zero, for tests.
func (e *Engine) Idle() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.core.Idle()
}
