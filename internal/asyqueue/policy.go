package asyqueue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/sched"
)

// The queue protocol's policy: the core queue every Asymptote task joins,
// the caps on waiting tasks, the texts a client reads and what happens to a
// task on each decision of the core. Both modes use it: the Dispatcher of
// the embedded default, and in multi-node mode the queue servers
// (redisq/frontend) with the leading scheduler (redisq/scheduler).
// (docs/design.md, "The queue protocol")

// QueueName is the core queue every Asymptote task joins.
const QueueName = "asy"

// NewCore returns a scheduling core with the tiers and the Asymptote
// queue defined. A task of that queue runs at most once: a client whose
// task ended early is told so and may send it again.
func NewCore(tiers []sched.Tier, now func() time.Time, rnd *rand.Rand) (*sched.Scheduler, error) {
	core, err := sched.New(sched.Config{Tiers: tiers, Now: now, Rand: rnd})
	if err != nil {
		return nil, fmt.Errorf("asyqueue: %w", err)
	}
	if err := core.DefineQueue(sched.QueueSpec{Name: QueueName}); err != nil {
		return nil, fmt.Errorf("asyqueue: %w", err)
	}
	return core, nil
}

// Denials: the errors a Queue's Submit returns; the session sends their
// text in `denied`.
var (
	ErrQueueFull    = errors.New("queue full")
	ErrNoBackend    = errors.New("no free backend for an interactive task")
	ErrStopped      = errors.New("server shutting down")
	ErrInvalidLimit = errors.New("invalid timeout")
)

// Texts a session sends in `end` when the scheduler ends its task.
const (
	HaltedText      = "Interactive task halted: its backend was needed for queued tasks"
	BackendLostText = "Backend went away during the task"
)

// Texts a queue server of multi-node mode ends a waiting task with when
// Redis lost it or stopped answering (docs/redis.md, "Faults").
const (
	RedisDownText = "Queue unavailable: Redis did not answer"
	TaskLostText  = "Task lost: Redis restarted without it"
)

// backendFaultPrefix begins the text of a task its backend could not run
// (gone before the start, or refusing it).
const backendFaultPrefix = "backend "

// ServerFault reports whether the error text a task ended with is the
// server's doing (its backend lost, halted or unable to start it, a
// shutdown, Redis) rather than the figure's: trying again later may work.
func ServerFault(text string) bool {
	switch text {
	case HaltedText, BackendLostText, ErrStopped.Error(), RedisDownText, TaskLostText:
		return true
	}
	return strings.HasPrefix(text, backendFaultPrefix)
}

// Default caps of the queue.
const (
	DefaultMaxQueued          = 1000
	DefaultMaxQueuedPerClient = 20
)

// Caps bound the tasks waiting in the queue. Zero fields take the
// defaults. Interactive tasks never wait, so they do not count.
type Caps struct {
	// MaxQueued caps the tasks waiting, all clients together (in
	// multi-node mode: all queue servers together).
	MaxQueued int
	// MaxQueuedPerClient caps those of one client address (in multi-node
	// mode: on one queue server).
	MaxQueuedPerClient int
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Caps) WithDefaults() Caps {
	if c.MaxQueued <= 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.MaxQueuedPerClient <= 0 {
		c.MaxQueuedPerClient = DefaultMaxQueuedPerClient
	}
	return c
}

// Waiting counts the waiting tasks of each client against the caps. It is
// not safe for concurrent use.
type Waiting struct {
	caps     Caps
	byClient map[string]int
}

// NewWaiting returns a count with no task, under caps (with defaults).
func NewWaiting(caps Caps) *Waiting {
	return &Waiting{caps: caps.WithDefaults(), byClient: map[string]int{}}
}

// Admit counts one more waiting task of client, or refuses it with
// ErrQueueFull when total (the tasks waiting now, all clients together)
// or the client's own count is at its cap.
func (w *Waiting) Admit(client string, total int) error {
	if total >= w.caps.MaxQueued || w.ClientFull(client) {
		return ErrQueueFull
	}
	w.byClient[client]++
	return nil
}

// ClientFull says whether client is at its own cap, so that a caller whose
// total is costly to count (multi-node mode asks Redis) can refuse first.
func (w *Waiting) ClientFull(client string) bool {
	return w.byClient[client] >= w.caps.MaxQueuedPerClient
}

// Leave counts one waiting task of client less: it started or left.
func (w *Waiting) Leave(client string) {
	if w.byClient[client]--; w.byClient[client] <= 0 {
		delete(w.byClient, client)
	}
}

// Reaction is what the queue protocol does with a task about one event of
// the core.
type Reaction struct {
	// Note, when its Kind is set, is the event the dashboard lists (its
	// Time is the caller's).
	Note dashboard.Event
	// Shorten, when > 0, is the task's new time limit from the start of
	// its run, after a downgrade to tier Tier.
	Shorten time.Duration
	Tier    int
	// End, when set, ends the task with this text for its client.
	End string
	// Cancel says the core still holds the job and must drop it before the
	// task ends (Scheduler.Cancel).
	Cancel bool
}

// React decides what happens to the task of e, which runs in the tier
// named from (empty when it has none). ok is false for an event that
// changes nothing for the task's client.
//
// A task whose run ended early (its backend went away, or the core
// released it) ends for its client with BackendLostText; the core would
// retry it under a retry policy, but an Asymptote task runs at most once,
// so a retry is cancelled in the core: left there, it would later take a
// backend with no client to run for.
func React(e sched.Event, tiers []sched.Tier, from string) (r Reaction, ok bool) {
	switch e.Kind {
	case sched.EventDowngraded:
		to := tiers[e.Tier].Name
		r.Note = dashboard.Event{Kind: "downgrade", Task: e.JobID, Detail: from + " → " + to}
		r.Shorten, r.Tier = e.Duration, e.Tier
	case sched.EventHalted:
		r.Note = dashboard.Event{Kind: "halt", Task: e.JobID, Detail: "its backend was needed for queued tasks"}
		r.End = HaltedText
	case sched.EventFailed, sched.EventCancelled:
		r.End = BackendLostText
	case sched.EventRetrying:
		r.End, r.Cancel = BackendLostText, true
	default:
		return Reaction{}, false
	}
	return r, true
}
