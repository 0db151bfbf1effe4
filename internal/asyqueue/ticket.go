package asyqueue

import (
	"sync"
	"time"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/sched"
)

// Start tells a session that its task may run now, where, and for how long.
type Start struct {
	Backend   backend.Starter
	BackendID string
	Timeout   time.Duration // 0 for an interactive task: no tier limit
}

// Update is what changed for a task since its session last looked.
type Update struct {
	// Estimate is set when the session should send a new `queue` message.
	Estimate *Estimate
	// Start is set once, when the task leaves the queue.
	Start *Start
	// Shorten is a new, shorter time limit from the start of the run (a
	// downgrade); zero when there is none.
	Shorten time.Duration
	// End is set when the scheduler ended the task: it was halted to free
	// its backend, or its backend went away. It is the text for the client.
	End string
}

// Estimate is a queued task's estimated wait (the median the core
// predicts) and place in the queue; Known is false while no backend could
// ever run it.
type Estimate struct {
	Wait  time.Duration
	Known bool
	// Position counts the tasks ahead of it in the queue: 0 starts next.
	Position int
}

// Ticket is a session's handle on its task in the dispatcher. The
// dispatcher posts updates; the session waits on Changed and calls Take.
type Ticket struct {
	id          string
	client      string
	interactive bool
	changed     chan struct{}

	mu      sync.Mutex
	pending Update

	// Owned by the dispatcher's Run goroutine.
	attempt    int
	queued     bool
	lastSent   sched.Estimate
	lastSentAt time.Time
	class      string    // fast, medium, slow, default or interactive
	tier       string    // the tier it runs in, once started
	backend    string    // where it runs, once started
	startedAt  time.Time // when it started
}

// NewTicket returns the handle of a task a Queue accepted: its id, the
// client's address and whether it is interactive.
func NewTicket(id, client string, interactive bool) *Ticket {
	return &Ticket{id: id, client: client, interactive: interactive, changed: make(chan struct{}, 1)}
}

// ID is the task's id in the scheduler.
func (t *Ticket) ID() string { return t.id }

// Changed is signalled whenever an update is waiting for Take.
func (t *Ticket) Changed() <-chan struct{} { return t.changed }

// Take returns and clears what changed since the last Take.
func (t *Ticket) Take() Update {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.pending
	t.pending = Update{}
	return u
}

func (t *Ticket) post(apply func(u *Update)) {
	t.mu.Lock()
	apply(&t.pending)
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// PostEstimate tells the session the task's new place and wait.
func (t *Ticket) PostEstimate(e Estimate) {
	t.post(func(u *Update) { u.Estimate = &e })
}

// PostStart tells the session its task may run now.
func (t *Ticket) PostStart(s Start) {
	t.post(func(u *Update) { u.Start = &s; u.Estimate = nil })
}

// PostShorten lowers the running task's time limit (a downgrade).
func (t *Ticket) PostShorten(limit time.Duration) {
	t.post(func(u *Update) {
		if u.Shorten == 0 || limit < u.Shorten {
			u.Shorten = limit
		}
	})
}

// PostEnd ends the task with reason, the client's text.
func (t *Ticket) PostEnd(reason string) {
	t.post(func(u *Update) {
		if u.End == "" {
			u.End = reason
		}
	})
}
