// Package jobs is the engine of usher's generic jobs: it drives the
// scheduling core (internal/sched) for the queues, jobs, workflows and
// agents of the /v1 API, and keeps them durable through a Store.
//
// One mutex serializes the core. Every operation decides in memory, appends
// its changes to the store while it still holds the mutex (so the store
// writes them in the core's order), and waits for them to be durable after
// letting go of it: callers are told of nothing that a crash could undo,
// and concurrent callers share one transaction (group commit).
//
// The files follow the API: queues.go (queues and key limits), submit.go
// (jobs and workflows), agents.go (leases, renewals, completions), read.go
// (jobs, workflows and stats as the API shows them), restore.go (rebuilding
// the core from the store at start).
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// Config configures an Engine.
type Config struct {
	Store Store
	// Tiers are the duration tiers of generic jobs; empty means
	// DefaultTiers.
	Tiers []sched.Tier
	// LeaseTTL is how long an agent's lease lasts after each call
	// (default 30 s).
	LeaseTTL time.Duration
	// MaxOutput caps the output kept per attempt; the tail is kept
	// (default 64 KiB).
	MaxOutput int
	// MaxPayload caps a job's payload (default 1 MiB).
	MaxPayload int
	// KeyRetention is how long an idempotency key is kept after its
	// enqueue (default DefaultKeyRetention).
	KeyRetention time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Rand is the scheduling core's source of randomness: random picks
	// and the jitter of backoffs (default: randomly seeded).
	Rand   *rand.Rand
	Logger *slog.Logger
	// Observer, when set, learns of every attempt's start and end, for
	// metrics (observe.go).
	Observer Observer
}

// DefaultTiers are the duration tiers of generic jobs unless configured:
// fast 1 min on every slot, medium 10 min on half, slow 1 h on a quarter.
func DefaultTiers() []sched.Tier {
	return []sched.Tier{
		{Name: "fast", Duration: time.Minute},
		{Name: "medium", Duration: 10 * time.Minute, Share: 0.5},
		{Name: "slow", Duration: time.Hour, Share: 0.25},
	}
}

func (c Config) withDefaults() Config {
	if len(c.Tiers) == 0 {
		c.Tiers = DefaultTiers()
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = 64 << 10
	}
	if c.MaxPayload <= 0 {
		c.MaxPayload = 1 << 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.KeyRetention <= 0 {
		c.KeyRetention = DefaultKeyRetention
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Engine serves generic jobs. Create it with Open and drive its clock with
// Run.
type Engine struct {
	cfg   Config
	store Store

	mu      sync.Mutex
	core    *sched.Scheduler
	queues  map[string]jobtype.Queue
	limits  map[string]jobtype.KeyLimit
	live    map[string]*liveJob // unfinished jobs by id
	traces  map[string]string   // unfinished jobs' trace contexts, of those that have one
	agents  map[string]*agent
	waiters []*waiter
	nextJob int64
	nextWF  int64
	pullBuf []sched.Assignment
	// draining: the server is shutting down; lease requests do not wait.
	draining bool
	ops      []Op    // changes of the operation in progress
	last     Pending // the changes appended last: waiting on it waits on all

	wake chan struct{} // the clock loop recomputes its deadline

	crons    map[string]*cronEntry // periodic jobs by name (cron.go)
	cronNext time.Time             // their earliest next tick; zero: none
	dd       dedup                 // idempotency keys and unique jobs (dedup.go)
	wf       wfWatch               // who waits for which workflow to finish (wfwait.go)
	obs      obsState              // for Config.Observer (observe.go)
}

// liveJob is what the engine keeps of an unfinished job beside the core.
type liveJob struct {
	n         int64
	id        string
	queue     string
	payload   json.RawMessage
	timeoutMs int64 // the job's own limit; 0: its tier's
	after     []string
	workflow  int64
	retryAt   time.Time // while delayed
	running   bool
	attempt   int
	agent     string
	unique    string    // its unique key; "": not a unique job
	runAt     time.Time // when a job that never ran is due (scheduled until then)
	readyAt   time.Time // when it last became ready; kept for Config.Observer only
	startedAt time.Time // when its attempt started; kept for Config.Observer only
}

// Open rebuilds the engine's state from the store.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	core, err := sched.New(sched.Config{Tiers: cfg.Tiers, Now: cfg.Now, Rand: cfg.Rand, Grace: Grace})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	e := &Engine{
		cfg: cfg, store: cfg.Store, core: core,
		queues: map[string]jobtype.Queue{}, limits: map[string]jobtype.KeyLimit{},
		live: map[string]*liveJob{}, agents: map[string]*agent{},
		wake: make(chan struct{}, 1), last: done{},
	}
	if err := e.restore(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// Run applies the passage of time until ctx ends: lapsed agent leases,
// retries whose backoff ended and the ticks of periodic jobs. It sleeps
// until the earliest of them.
func (e *Engine) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := e.NextDeadline()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(e.cfg.Now()), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-timer.C:
			e.tick()
		}
	}
}

// NextDeadline is when Run next wakes (the earliest lease end, due time,
// retry or snooze, deadline, time limit or periodic job's tick), or the zero time when nothing
// waits for time.
func (e *Engine) NextDeadline() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nextDeadlineLocked()
}

func (e *Engine) nextDeadlineLocked() time.Time {
	next := e.core.NextDeadline()
	if !e.cronNext.IsZero() && (next.IsZero() || e.cronNext.Before(next)) {
		next = e.cronNext
	}
	return next
}

func (e *Engine) tick() {
	if err := e.Tick(context.Background()); err != nil {
		e.logWriteFailure("jobs: writing expired leases, retries and periodic jobs", err)
	}
}

// Tick applies the passage of time up to the clock's now, as Run does at
// each deadline, and waits until the changes are durable. Tests that
// inject a clock call it after moving the clock.
func (e *Engine) Tick(ctx context.Context) error {
	e.mu.Lock()
	e.core.Tick()
	e.fireCronsLocked(e.cfg.Now())
	e.afterChangeLocked()
	p := e.flushLocked()
	e.mu.Unlock()
	return p.Wait(ctx)
}

// poke tells the clock loop that the next deadline may have moved.
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// emit records a change of the operation in progress.
func (e *Engine) emit(op Op) { e.ops = append(e.ops, op) }

// flushLocked hands the operation's changes to the store, in order, and
// returns what to wait on: those changes, or when there are none the last
// ones appended (the store writes in order, so that covers anything this
// operation may have flushed earlier).
func (e *Engine) flushLocked() Pending {
	if len(e.ops) == 0 {
		return e.last
	}
	e.last = e.store.Append(e.ops...)
	clear(e.ops)
	e.ops = e.ops[:0]
	return e.last
}

// commit is flushLocked, unlock, and wait: the end of every operation
// that changes state.
func (e *Engine) commit(ctx context.Context) error {
	p := e.flushLocked()
	e.mu.Unlock()
	return waitError(p.Wait(ctx))
}

// logWriteFailure logs changes the engine made that the store did not
// write: an error, or a warning when the store's writing ended with the
// term (ErrWritingEnded).
func (e *Engine) logWriteFailure(msg string, err error) {
	level := slog.LevelError
	if writingOver(err) {
		level = slog.LevelWarn
	}
	e.cfg.Logger.Log(context.Background(), level, msg, "err", err)
}

// waitError is the error of waiting for changes to become durable: the
// store's failure (ErrStore), or the caller's context ending first. The
// latter keeps the context's error, so that the API can tell a client
// that left (nothing to answer, nothing to log) from a store that failed;
// the changes may still become durable then.
func waitError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("jobs: stopped waiting for the store: %w", err)
	}
	return fmt.Errorf("%w: %w", ErrStore, err)
}

// change runs f with the engine locked; when f succeeds it carries out
// what the core decided and waits for the changes to be durable.
func (e *Engine) change(ctx context.Context, f func() error) error {
	e.mu.Lock()
	if err := f(); err != nil {
		e.mu.Unlock()
		return err
	}
	e.afterChangeLocked()
	return e.commit(ctx)
}

// done is a Pending with nothing to wait for.
type done struct{}

func (done) Wait(context.Context) error { return nil }

// afterChangeLocked carries out what the core decided: events, then work
// for agents waiting for some.
func (e *Engine) afterChangeLocked() {
	e.applyEventsLocked()
	e.serveWaitersLocked()
	e.poke()
}

func (e *Engine) applyEventsLocked() {
	now := e.cfg.Now()
	for _, ev := range e.core.Events() {
		switch ev.Kind {
		case sched.EventStopped:
			e.direct(ev.WorkerID, func(a *agent) { a.stop = append(a.stop, jobtype.JobRef{ID: ev.JobID, Attempt: ev.Attempt}) })
		case sched.EventDowngraded:
			e.downgraded(ev)
		case sched.EventTimedOut:
			e.direct(ev.WorkerID, func(a *agent) { a.stop = append(a.stop, jobtype.JobRef{ID: ev.JobID, Attempt: ev.Attempt}) })
		case sched.EventRetrying:
			e.requeued(ev.JobID, ev.At, lostResult(ev))
		case sched.EventFailed:
			e.finished(ev.JobID, jobtype.StateFailed, now, lostResult(ev))
		case sched.EventCancelled:
			e.finished(ev.JobID, jobtype.StateCancelled, now, nil)
		case sched.EventExpired:
			e.expired(ev.JobID, now)
		case sched.EventLeaseExpired:
			e.cfg.Logger.Warn("jobs: agent lease lapsed", "agent", ev.WorkerID)
			delete(e.agents, ev.WorkerID)
		}
	}
}

// lostResult is the result of an attempt that the server ended: its agent
// left or lapsed, or it ran past its time limit.
func lostResult(ev sched.Event) *jobtype.Result {
	msg := fmt.Sprintf("agent %s left or its lease lapsed while the job ran", ev.WorkerID)
	if ev.TimedOut {
		msg = ErrTimeLimit.Error()
	}
	return &jobtype.Result{ID: ev.JobID, Attempt: ev.Attempt, ExitCode: -1, Error: msg}
}

// downgraded tells an agent of an elastic job's shorter limit.
func (e *Engine) downgraded(ev sched.Event) {
	e.direct(ev.WorkerID, func(a *agent) {
		if ev.StopNow {
			a.stop = append(a.stop, jobtype.JobRef{ID: ev.JobID, Attempt: ev.Attempt})
			return
		}
		a.timeouts = append(a.timeouts, jobtype.JobTimeout{ID: ev.JobID, Attempt: ev.Attempt, TimeoutMs: ev.Duration.Milliseconds()})
	})
}

func (e *Engine) direct(agentID string, f func(*agent)) {
	if a := e.agents[agentID]; a != nil {
		f(a)
	}
}

// requeued records that a job runs again at (or after) at.
func (e *Engine) requeued(id string, at time.Time, r *jobtype.Result) {
	j := e.live[id]
	if j == nil {
		return
	}
	e.observeEnd(j, OutcomeRetried)
	e.readied(j, at)
	e.dropHeld(j)
	j.running, j.agent = false, ""
	if at.After(e.cfg.Now()) {
		j.retryAt = at
	}
	e.emit(Op{Kind: OpRequeue, ID: j.n, At: at, Result: r, Ended: e.cfg.Now()})
}

// finished records a job's final state and forgets it.
func (e *Engine) finished(id string, s jobtype.State, at time.Time, r *jobtype.Result) {
	j := e.live[id]
	if j == nil {
		return
	}
	e.observeFinish(j, s, r)
	delete(e.live, id)
	delete(e.traces, id)
	e.liveGone(j)
	e.dropHeld(j)
	e.dropUnique(j)
	e.emit(Op{Kind: OpFinish, ID: j.n, State: s, At: at, Result: r})
}

// dropHeld forgets that a job runs on its agent.
func (e *Engine) dropHeld(j *liveJob) {
	if a := e.agents[j.agent]; a != nil && j.running {
		delete(a.held, j.id)
	}
}

// jobID is the string form of a job number, the core's id.
func jobID(n int64) string { return strconv.FormatInt(n, 10) }

// parseID reads a job or workflow id from the API.
func parseID(field, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, notFound(field, "no job %q", s)
	}
	return n, nil
}
