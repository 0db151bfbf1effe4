package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// agent is what the engine keeps of an agent beside the core's worker:
// what it offers and what it must be told at its next renewal.
type agent struct {
	held     map[string]int // running jobs by id: their attempt
	caps     []string
	queues   []string
	slots    int
	stop     []jobtype.JobRef
	timeouts []jobtype.JobTimeout
}

// waiter is a lease request waiting for work.
type waiter struct {
	agent string
	max   int
	ch    chan leased // buffered: the engine never blocks on it
}

type leased struct {
	jobs []jobtype.LeasedJob
	p    Pending
}

// Limits of a lease request.
const (
	maxSlots  = 10000
	maxWaitMs = 60000
)

func checkLease(req *jobtype.LeaseRequest) error {
	if err := checkAgentName(req.Agent); err != nil {
		return err
	}
	if req.Slots < 1 || req.Slots > maxSlots {
		return invalid("slots", "%d is outside 1..%d", req.Slots, maxSlots)
	}
	if req.Max == 0 {
		req.Max = req.Slots
	}
	if req.Max < 1 || req.Max > req.Slots {
		return invalid("max", "%d is outside 1..slots (%d)", req.Max, req.Slots)
	}
	if req.WaitMs < 0 || req.WaitMs > maxWaitMs {
		return invalid("waitMs", "%d is outside 0..%d", req.WaitMs, maxWaitMs)
	}
	for i, c := range req.Capabilities {
		if c == "" {
			return invalid(fmt.Sprintf("capabilities[%d]", i), "empty capability")
		}
	}
	return nil
}

func checkAgentName(name string) error {
	if name == "" || len(name) > 128 {
		return invalid("agent", "an agent names itself with 1-128 characters")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return invalid("agent", "control character in %q", name)
		}
	}
	return nil
}

// Lease hands an agent up to req.Max jobs, waiting up to req.WaitMs for
// some when none is ready. Asking registers the agent and renews its lease.
func (e *Engine) Lease(ctx context.Context, req jobtype.LeaseRequest) (jobtype.LeaseAnswer, error) {
	if err := checkLease(&req); err != nil {
		return jobtype.LeaseAnswer{}, err
	}
	ans := jobtype.LeaseAnswer{Jobs: []jobtype.LeasedJob{}, LeaseMs: e.cfg.LeaseTTL.Milliseconds()}
	e.mu.Lock()
	if err := e.registerLocked(req); err != nil {
		e.mu.Unlock()
		return jobtype.LeaseAnswer{}, err
	}
	e.poke() // a new lease may end before the clock loop's next deadline
	if req.Holding != nil {
		e.reconcileLocked(req.Agent, *req.Holding)
		e.afterChangeLocked()
	}
	jobs := e.pullLocked(req.Agent, req.Max)
	if len(jobs) > 0 || req.WaitMs == 0 || e.draining {
		if err := e.commit(ctx); err != nil {
			// No answer carries them: nobody has them. The store writes
			// the change after the lease (or fails it, if it failed).
			e.unlease(jobs)
			return jobtype.LeaseAnswer{}, err
		}
		ans.Jobs = append(ans.Jobs, jobs...)
		return ans, nil
	}
	w := &waiter{agent: req.Agent, max: req.Max, ch: make(chan leased, 1)}
	e.waiters = append(e.waiters, w)
	e.mu.Unlock()
	got, ok := e.await(ctx, w, min(time.Duration(req.WaitMs)*time.Millisecond, e.cfg.LeaseTTL/2))
	if !ok {
		return ans, nil
	}
	if ctx.Err() != nil {
		e.Unlease(got.jobs) // served as the agent left: nobody has them
		return jobtype.LeaseAnswer{}, ctx.Err()
	}
	if got.jobs != nil {
		ans.Jobs = got.jobs
	}
	if err := waitError(got.p.Wait(ctx)); err != nil {
		e.unlease(got.jobs)
		return jobtype.LeaseAnswer{}, err
	}
	return ans, nil
}

// await waits for a waiter to be served, for d, or for ctx. When it gives
// up, the waiter leaves (or, served meanwhile, takes what it got).
func (e *Engine) await(ctx context.Context, w *waiter, d time.Duration) (leased, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case got := <-w.ch:
		return got, true
	case <-timer.C:
	case <-ctx.Done():
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if i := slices.Index(e.waiters, w); i >= 0 {
		e.waiters = slices.Delete(e.waiters, i, i+1)
		_ = e.core.Renew(w.agent) // it was asking all along
		return leased{}, false
	}
	return <-w.ch, true
}

// registerLocked makes the agent known to the core with its slots and
// capabilities, or renews its lease when nothing changed.
func (e *Engine) registerLocked(req jobtype.LeaseRequest) error {
	caps, queues := sortedSet(req.Capabilities), sortedSet(req.Queues)
	for i, q := range queues {
		if _, ok := e.queues[q]; !ok {
			return invalid(fmt.Sprintf("queues[%d]", i), "unknown queue %q", q)
		}
	}
	a := e.agents[req.Agent]
	if a != nil && a.slots == req.Slots && slices.Equal(a.caps, caps) && slices.Equal(a.queues, queues) {
		if err := e.core.Renew(req.Agent); err == nil {
			return nil
		}
	}
	err := e.core.AddWorker(sched.WorkerSpec{ID: req.Agent, Capabilities: caps, Queues: queues, Slots: req.Slots, LeaseTTL: e.cfg.LeaseTTL})
	if err != nil {
		return invalid("", "%v", err)
	}
	if a == nil {
		a = &agent{held: map[string]int{}}
		e.agents[req.Agent] = a
	}
	a.caps, a.queues, a.slots = caps, queues, req.Slots
	return nil
}

func sortedSet(xs []string) []string {
	out := slices.Clone(xs)
	sort.Strings(out)
	return slices.Compact(out)
}

// pullLocked takes up to max jobs for the agent from the core and records
// their start.
func (e *Engine) pullLocked(agentID string, max int) []jobtype.LeasedJob {
	as, err := e.core.PullAppend(e.pullBuf[:0], agentID, max)
	e.pullBuf = as[:0]
	defer e.applyEventsLocked() // the cycle may have downgraded running jobs
	if err != nil || len(as) == 0 {
		return nil
	}
	now := e.cfg.Now()
	out := make([]jobtype.LeasedJob, len(as))
	for i, a := range as {
		j := e.live[a.JobID]
		j.running, j.attempt, j.agent, j.retryAt = true, a.Attempt, agentID, time.Time{}
		e.agents[agentID].held[a.JobID] = a.Attempt
		e.observeStart(j, now)
		timeout := a.Duration.Milliseconds()
		if j.timeoutMs > 0 && j.timeoutMs < timeout {
			timeout = j.timeoutMs
		}
		out[i] = jobtype.LeasedJob{ID: a.JobID, Queue: a.Queue, Attempt: a.Attempt, Payload: j.payload, TimeoutMs: timeout,
			ConfirmStart: e.queues[a.Queue].StrictStart, Traceparent: e.traces[a.JobID]}
		e.emit(Op{Kind: OpStart, ID: j.n, Attempt: a.Attempt, Agent: agentID, At: now})
	}
	return out
}

// Unlease hands back leased jobs that never reached their agent (its
// connection broke before the answer was written): they are queued again
// and the attempts do not count.
func (e *Engine) Unlease(jobs []jobtype.LeasedJob) {
	if err := e.unlease(jobs).Wait(context.Background()); err != nil {
		e.logWriteFailure("jobs: writing unleased jobs", err)
	}
}

// unlease is Unlease without waiting for the store: it returns what to
// wait on.
func (e *Engine) unlease(jobs []jobtype.LeasedJob) Pending {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, lj := range jobs {
		e.unleaseLocked(lj.ID, lj.Attempt)
	}
	e.afterChangeLocked()
	return e.flushLocked()
}

func (e *Engine) unleaseLocked(id string, attempt int) {
	j := e.live[id]
	if j == nil || !e.core.Release(id, attempt) {
		return
	}
	e.dropHeld(j)
	j.running, j.agent, j.attempt = false, "", attempt-1
	e.readied(j, e.cfg.Now())
	e.emit(Op{Kind: OpRequeue, ID: j.n, At: e.cfg.Now()})
}

// reconcileLocked hands back the jobs the engine has running on an agent
// that says it does not hold them: their lease answer never reached it.
func (e *Engine) reconcileLocked(agentID string, holding []jobtype.JobRef) {
	a := e.agents[agentID]
	if a == nil || len(a.held) == 0 {
		return
	}
	has := make(map[jobtype.JobRef]bool, len(holding))
	for _, h := range holding {
		has[h] = true
	}
	for id, attempt := range a.held {
		if !has[jobtype.JobRef{ID: id, Attempt: attempt}] {
			e.cfg.Logger.Warn("jobs: an agent never got a job leased to it; queued again", "agent", agentID, "job", id)
			e.unleaseLocked(id, attempt)
		}
	}
}

// serveWaitersLocked gives ready work to agents waiting for it.
func (e *Engine) serveWaitersLocked() {
	if len(e.waiters) == 0 {
		return
	}
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		jobs := e.pullLocked(w.agent, w.max)
		if len(jobs) == 0 {
			if _, known := e.agents[w.agent]; known {
				kept = append(kept, w)
				continue
			}
		}
		w.ch <- leased{jobs: jobs, p: e.flushLocked()}
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
}

// Renew extends an agent's lease and tells it which running jobs to stop
// and which got a shorter time limit. ErrNotFound when its lease lapsed.
func (e *Engine) Renew(agentID string) (jobtype.RenewAnswer, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.agents[agentID]
	if a == nil || e.core.Renew(agentID) != nil {
		return jobtype.RenewAnswer{}, notFound("agent", "no agent %q holds a lease (it lapsed, or the agent never asked for work)", agentID)
	}
	ans := jobtype.RenewAnswer{LeaseMs: e.cfg.LeaseTTL.Milliseconds(), Stop: a.stop, Timeouts: a.timeouts}
	if ans.Stop == nil {
		ans.Stop = []jobtype.JobRef{}
	}
	if ans.Timeouts == nil {
		ans.Timeouts = []jobtype.JobTimeout{}
	}
	a.stop, a.timeouts = nil, nil
	return ans, nil
}

// Complete records how attempts ended. A repeated, late or unknown report
// is acknowledged as ignored and changes nothing.
func (e *Engine) Complete(ctx context.Context, agentID string, results []jobtype.Result) ([]jobtype.Ack, error) {
	for i := range results {
		if err := checkResult(&results[i]); err != nil {
			return nil, prefixed(fmt.Sprintf("results[%d]", i), err)
		}
	}
	acks := make([]jobtype.Ack, len(results))
	e.mu.Lock()
	_ = e.core.Renew(agentID)
	now := e.cfg.Now()
	for i := range results {
		acks[i] = e.completeLocked(&results[i], now)
	}
	e.afterChangeLocked()
	return acks, e.commit(ctx)
}

func (e *Engine) completeLocked(r *jobtype.Result, now time.Time) jobtype.Ack {
	r.Output = tail(r.Output, e.cfg.MaxOutput)
	r.Error = tail(r.Error, 4096)
	switch {
	case r.SnoozeMs > 0:
		return e.snoozeLocked(r)
	case r.Cancel:
		return e.handlerCancelLocked(r, now)
	}
	outcome := sched.FailedAttempt
	if r.Succeeded() {
		outcome = sched.Succeeded
	}
	ack := e.core.Complete(r.ID, r.Attempt, outcome)
	if ack.Ignored {
		return jobtype.Ack{ID: r.ID, Ignored: true}
	}
	switch {
	case outcome == sched.Succeeded:
		e.finished(r.ID, jobtype.StateSucceeded, now, r)
	case ack.Retrying:
		e.requeued(r.ID, ack.RetryAt, r)
	default:
		e.finished(r.ID, jobtype.StateFailed, now, r)
	}
	return jobtype.Ack{ID: r.ID, Retrying: ack.Retrying}
}

// tail keeps the last max bytes of s, cut at a UTF-8 boundary.
func tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}

// Leave deregisters an agent: its running jobs are released and retried
// by their policy, as when its lease lapses.
func (e *Engine) Leave(ctx context.Context, agentID string) error {
	e.mu.Lock()
	err := e.core.RemoveWorker(agentID)
	if err != nil && !errors.Is(err, sched.ErrUnknownWorker) {
		e.mu.Unlock()
		return fmt.Errorf("jobs: agent %s leaves: %w", agentID, err)
	}
	delete(e.agents, agentID)
	e.afterChangeLocked()
	return e.commit(ctx)
}

// Drain ends every waiting lease request with no work and makes later
// ones answer at once: the server is shutting down.
func (e *Engine) Drain() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.draining = true
	for _, w := range e.waiters {
		w.ch <- leased{p: e.last}
	}
	e.waiters = nil
	e.wakeWorkflowWaitersLocked()
}

// Waiting returns how many lease requests wait for work.
func (e *Engine) Waiting() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.waiters)
}

// Started records that an agent started an attempt of a job from a
// strict-start queue, so that the queue's next job may be handed out. A
// confirmation for an attempt the agent does not hold is ignored.
func (e *Engine) Started(ctx context.Context, req jobtype.StartedRequest) (jobtype.StartedAnswer, error) {
	if err := checkAgentName(req.Agent); err != nil {
		return jobtype.StartedAnswer{}, err
	}
	if req.ID == "" || req.Attempt < 1 {
		return jobtype.StartedAnswer{}, invalid("", "needs an id and an attempt of at least 1")
	}
	e.mu.Lock()
	_ = e.core.Renew(req.Agent) // a sign of life
	a := e.agents[req.Agent]
	if a == nil || a.held[req.ID] != req.Attempt || !e.core.Confirm(req.ID, req.Attempt) {
		e.mu.Unlock()
		return jobtype.StartedAnswer{Ignored: true}, nil
	}
	e.afterChangeLocked() // the queue's next job may go to a waiting agent
	return jobtype.StartedAnswer{}, e.commit(ctx)
}
