package asyqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/sandbox"
	"github.com/usherhq/usher/internal/sched"
)

// DispatcherConfig sets up a Dispatcher. Zero fields take defaults.
type DispatcherConfig struct {
	// Tiers are the duration tiers (sched.DefaultTiers when empty).
	Tiers []sched.Tier
	// Caps bound the tasks waiting in the queue.
	Caps Caps
	// EstimateEvery is how often queued tasks' estimates are recomputed
	// (default 1 s); EstimateResend is the longest a queued client goes
	// without a `queue` message (default 5 s).
	EstimateEvery  time.Duration
	EstimateResend time.Duration
	// Now and Rand feed the scheduling core (time.Now and a random seed
	// when nil).
	Now  func() time.Time
	Rand *rand.Rand
}

func (c *DispatcherConfig) setDefaults() {
	if len(c.Tiers) == 0 {
		c.Tiers = sched.DefaultTiers()
	}
	c.Caps = c.Caps.WithDefaults()
	if c.EstimateEvery <= 0 {
		c.EstimateEvery = time.Second
	}
	if c.EstimateResend <= 0 {
		c.EstimateResend = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
}

// Tiers are the fast/medium/slow duration tiers of the Asymptote service
// (docs/design.md, "Duration tiers and preemption"): the
// medium and slow limits when set (> 0), shares of the backends otherwise
// (half and a quarter, rounded up). Single-node and multi-node mode build
// their tiers here.
func Tiers(medium, slow int) []sched.Tier {
	t := sched.DefaultTiers()
	if medium > 0 {
		t[1].Limit, t[1].Share = medium, 0
	}
	if slow > 0 {
		t[2].Limit, t[2].Share = slow, 0
	}
	return t
}

// Dispatcher drives the scheduling core for the Asymptote service: one
// goroutine (Run) owns the core; sessions and backends talk to it through
// methods that hand it closures, and it answers through Tickets.
type Dispatcher struct {
	cfg     DispatcherConfig
	core    *sched.Scheduler
	cmds    chan func()
	stopped chan struct{}

	// Owned by the Run goroutine.
	tickets  map[string]*Ticket
	backends map[string]backend.Starter
	waiting  *Waiting
	queued   int
	seq      uint64
	fresh    bool            // a task joined or left the queue since the last estimate pass
	down     map[string]bool // remote backends out of the pool, for the dashboard
	recent   RecentEvents
	ended    Throughput // tasks that ran, for the dashboard
}

// NewDispatcher returns a dispatcher with no backends; call Run.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	cfg.setDefaults()
	core, err := NewCore(cfg.Tiers, cfg.Now, cfg.Rand)
	if err != nil {
		return nil, err
	}
	return &Dispatcher{
		cfg:      cfg,
		core:     core,
		cmds:     make(chan func(), 64),
		stopped:  make(chan struct{}),
		tickets:  make(map[string]*Ticket),
		backends: make(map[string]backend.Starter),
		waiting:  NewWaiting(cfg.Caps),
		down:     make(map[string]bool),
	}, nil
}

// Timeouts lists the task timeouts a client may ask for: the tiers' durations.
func (d *Dispatcher) Timeouts() []time.Duration {
	out := make([]time.Duration, len(d.cfg.Tiers))
	for i, t := range d.cfg.Tiers {
		out[i] = t.Duration
	}
	return out
}

// Run drives the core until ctx ends. Tasks still known then get an End.
func (d *Dispatcher) Run(ctx context.Context) {
	defer close(d.stopped)
	ticker := time.NewTicker(d.cfg.EstimateEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, t := range d.tickets {
				t.PostEnd(ErrStopped.Error())
			}
			return
		case f := <-d.cmds:
			f()
			d.drain()
			d.settle()
			if d.fresh {
				d.sendEstimates()
			}
		case <-ticker.C:
			d.core.Tick()
			d.settle()
			d.sendEstimates()
		}
	}
}

// drain runs the commands already waiting, so that a burst of arrivals is
// settled and estimated once.
func (d *Dispatcher) drain() {
	for range cap(d.cmds) {
		select {
		case f := <-d.cmds:
			f()
		default:
			return
		}
	}
}

// do runs f on the Run goroutine and waits until it has run.
func (d *Dispatcher) do(f func()) error {
	done := make(chan struct{})
	select {
	case d.cmds <- func() { f(); close(done) }:
	case <-d.stopped:
		return ErrStopped
	}
	select {
	case <-done:
		return nil
	case <-d.stopped:
		return ErrStopped
	}
}

// AddBackend makes a backend slot available to the queue.
func (d *Dispatcher) AddBackend(id string, s backend.Starter) error {
	var err error
	if e := d.do(func() {
		err = d.core.AddWorker(sched.WorkerSpec{ID: id, Slots: 1, Push: true})
		if err == nil {
			d.backends[id] = s
			delete(d.down, id)
		}
	}); e != nil {
		return e
	}
	return err
}

// MarkDown lists a backend that is not in the pool (a remote one that does
// not answer yet) as down on the dashboard, until AddBackend adds it.
func (d *Dispatcher) MarkDown(id string) {
	_ = d.do(func() {
		if _, in := d.backends[id]; !in {
			d.down[id] = true
		}
	})
}

// RemoveBackend takes a backend slot out of the queue; a task running on
// it ends with "Backend went away during the task". The dashboard shows it
// as down.
func (d *Dispatcher) RemoveBackend(id string) error {
	var err error
	if e := d.do(func() {
		err = d.core.RemoveWorker(id)
		delete(d.backends, id)
		d.down[id] = true
	}); e != nil {
		return e
	}
	return err
}

// Submit queues t, or starts it at once when it is interactive (Queue).
func (d *Dispatcher) Submit(client string, t sandbox.Task) (*Ticket, error) {
	if t.Interactive {
		return d.StartInteractive(client)
	}
	return d.Enqueue(client, t.Timeout)
}

// Enqueue queues a task of the given timeout (0: a "default" task) for
// client. It fails with ErrQueueFull when the queue or the client's share
// of it is full.
func (d *Dispatcher) Enqueue(client string, timeout time.Duration) (*Ticket, error) {
	var t *Ticket
	var err error
	if e := d.do(func() { t, err = d.enqueue(client, timeout) }); e != nil {
		return nil, e
	}
	return t, err
}

func (d *Dispatcher) enqueue(client string, timeout time.Duration) (*Ticket, error) {
	spec := sched.JobSpec{Queue: QueueName, Default: timeout == 0}
	if timeout != 0 {
		tier, ok := d.tierOf(timeout)
		if !ok {
			return nil, fmt.Errorf("%w: %v", ErrInvalidLimit, timeout)
		}
		spec.Tier = tier
	}
	if err := d.waiting.Admit(client, d.queued); err != nil {
		d.recent.Add(d.cfg.Now(), "denial", "", err.Error())
		return nil, err
	}
	spec.ID = d.nextID()
	if err := d.core.Submit(spec); err != nil {
		d.waiting.Leave(client)
		return nil, fmt.Errorf("asyqueue: submit: %w", err)
	}
	t := NewTicket(spec.ID, client, false)
	t.queued, t.class = true, d.classOf(spec)
	d.tickets[t.id] = t
	d.queued++
	d.fresh = true
	return t, nil
}

// StartInteractive starts an interactive task on a free backend at once, or
// fails with ErrNoBackend (and downgrades one default task so that the next
// attempt may find room: docs/design.md, "Duration tiers and preemption").
func (d *Dispatcher) StartInteractive(client string) (*Ticket, error) {
	var t *Ticket
	var err error
	if e := d.do(func() { t, err = d.startInteractive(client) }); e != nil {
		return nil, e
	}
	return t, err
}

func (d *Dispatcher) startInteractive(client string) (*Ticket, error) {
	a, err := d.core.StartInteractive(sched.JobSpec{ID: d.nextID(), Queue: QueueName})
	if errors.Is(err, sched.ErrDenied) {
		d.recent.Add(d.cfg.Now(), "denial", "", ErrNoBackend.Error())
		return nil, ErrNoBackend
	}
	if err != nil {
		return nil, fmt.Errorf("asyqueue: interactive: %w", err)
	}
	t := NewTicket(a.JobID, client, true)
	t.class = "interactive"
	d.tickets[t.id] = t
	d.begin(t, a)
	return t, nil
}

// Release tells the dispatcher a task is over: a queued task leaves the
// queue, a running one frees its backend. ran says whether the run went to
// its own end (whatever asy said) rather than being aborted.
func (d *Dispatcher) Release(t *Ticket, ran bool) {
	_ = d.do(func() { d.release(t, ran) })
}

func (d *Dispatcher) release(t *Ticket, ran bool) {
	if d.tickets[t.id] != t {
		return
	}
	delete(d.tickets, t.id)
	if t.queued {
		d.unqueue(t)
		_ = d.core.Cancel(t.id)
		return
	}
	outcome := sched.Succeeded
	if !ran {
		outcome = sched.FailedAttempt
	}
	d.core.Complete(t.id, t.attempt, outcome)
	d.ended.Add(d.cfg.Now())
}

// Snapshot returns the core's snapshot, for metrics and the dashboard.
func (d *Dispatcher) Snapshot() (sched.Snapshot, error) {
	var s sched.Snapshot
	err := d.do(func() { s = d.core.Snapshot() })
	return s, err
}

// settle starts what the core assigns and passes on what it decided. Events
// go first: a halted task must hear it before its backend is reused.
func (d *Dispatcher) settle() {
	assignments := d.core.Dispatch()
	for _, e := range d.core.Events() {
		d.apply(e)
	}
	for _, a := range assignments {
		if t := d.tickets[a.JobID]; t != nil {
			d.unqueue(t)
			d.begin(t, a)
		}
	}
}

func (d *Dispatcher) begin(t *Ticket, a sched.Assignment) {
	t.attempt = a.Attempt
	t.backend, t.startedAt = a.WorkerID, d.cfg.Now()
	if !a.Interactive {
		t.tier = d.cfg.Tiers[a.Tier].Name
	}
	t.PostStart(Start{Backend: d.backends[a.WorkerID], BackendID: a.WorkerID, Timeout: a.Duration})
}

// apply carries out the queue protocol's reaction to a core event.
func (d *Dispatcher) apply(e sched.Event) {
	t := d.tickets[e.JobID]
	if t == nil {
		return
	}
	r, ok := React(e, d.cfg.Tiers, t.tier)
	if !ok {
		return
	}
	if r.Cancel {
		_ = d.core.Cancel(e.JobID)
	}
	if r.Note.Kind != "" {
		d.recent.Add(d.cfg.Now(), r.Note.Kind, r.Note.Task, r.Note.Detail)
	}
	if r.Shorten > 0 {
		t.tier = d.cfg.Tiers[r.Tier].Name
		t.PostShorten(r.Shorten)
	}
	if r.End != "" {
		t.PostEnd(r.End)
	}
}

func (d *Dispatcher) unqueue(t *Ticket) {
	if !t.queued {
		return
	}
	t.queued = false
	d.queued--
	d.fresh = true // the tasks behind it moved up
	d.waiting.Leave(t.client)
}

// sendEstimates tells each queued task its wait and position when it is
// new, its position moved, its wait changed noticeably, or it was last told
// EstimateResend ago.
func (d *Dispatcher) sendEstimates() {
	d.fresh = false
	if d.queued == 0 {
		return
	}
	estimates, err := d.core.Estimates(QueueName, d.queued)
	if err != nil {
		return
	}
	now := d.cfg.Now()
	for _, e := range estimates {
		t := d.tickets[e.JobID]
		if t == nil || !t.queued {
			continue
		}
		if !t.lastSentAt.IsZero() && !changed(e, t.lastSent) && now.Sub(t.lastSentAt) < d.cfg.EstimateResend {
			continue
		}
		t.lastSent, t.lastSentAt = e, now
		t.PostEstimate(Estimate{Wait: e.Wait, Known: e.Known, Position: e.Position})
	}
}

// changed says whether a client told prev should be told e.
func changed(e, prev sched.Estimate) bool {
	return e.Position != prev.Position || e.ChangedFrom(prev)
}

// classOf names a task's class as clients chose it.
func (d *Dispatcher) classOf(spec sched.JobSpec) string {
	if spec.Default {
		return "default"
	}
	return d.cfg.Tiers[spec.Tier].Name
}

func (d *Dispatcher) tierOf(timeout time.Duration) (int, bool) {
	for i, t := range d.cfg.Tiers {
		if t.Duration == timeout {
			return i, true
		}
	}
	return 0, false
}

func (d *Dispatcher) nextID() string {
	d.seq++
	return "asy-" + strconv.FormatUint(d.seq, 10)
}
