package asyqueue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/backend"
	"github.com/usherhq/usher/internal/sandbox"
)

// idleBackend is a Starter the dispatcher tests hand out without ever
// starting: they check the dispatcher's decisions, not runs.
type idleBackend struct{}

func (idleBackend) Start(context.Context, sandbox.Task, sandbox.Sink) (backend.Execution, error) {
	return nil, errors.New("idleBackend never runs tasks")
}

func newDispatcher(t *testing.T, backends int) *Dispatcher {
	t.Helper()
	return startDispatcher(t, DispatcherConfig{Caps: Caps{MaxQueued: 4, MaxQueuedPerClient: 3}, EstimateEvery: 20 * time.Millisecond}, backends)
}

func startDispatcher(t *testing.T, cfg DispatcherConfig, backends int) *Dispatcher {
	t.Helper()
	d, err := NewDispatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-d.stopped })
	go d.Run(ctx)
	for i := range backends {
		if err := d.AddBackend(fmt.Sprintf("b%d", i), idleBackend{}); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// next waits for the ticket's next non-empty update.
func next(t *testing.T, tk *Ticket) Update {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-tk.Changed():
			if u := tk.Take(); u != (Update{}) {
				return u
			}
		case <-deadline:
			t.Fatalf("ticket %s: no update within 5 s", tk.ID())
		}
	}
}

// waitStart waits until the ticket starts, skipping estimates.
func waitStart(t *testing.T, tk *Ticket) Start {
	t.Helper()
	for {
		u := next(t, tk)
		if u.Start != nil {
			return *u.Start
		}
		if u.End != "" {
			t.Fatalf("ticket %s ended (%s) before it started", tk.ID(), u.End)
		}
	}
}

func enqueue(t *testing.T, d *Dispatcher, client string, timeout time.Duration) *Ticket {
	t.Helper()
	tk, err := d.Enqueue(client, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestQueuedTaskGetsEstimateThenStartsWhenBackendFrees(t *testing.T) {
	d := newDispatcher(t, 1)
	first := enqueue(t, d, "a", 3*time.Second)
	if s := waitStart(t, first); s.Timeout != 3*time.Second || s.BackendID != "b0" {
		t.Fatalf("first start = %+v, want 3s on b0", s)
	}
	second := enqueue(t, d, "a", 3*time.Second)
	u := next(t, second)
	if u.Start != nil || u.Estimate == nil || !u.Estimate.Known {
		t.Fatalf("second's first update = %+v, want a known estimate and no start", u)
	}
	d.Release(first, true)
	if s := waitStart(t, second); s.BackendID != "b0" {
		t.Fatalf("second start = %+v, want b0", s)
	}
}

func TestDefaultTaskStartsSlowAndIsDowngradedWhenSlowTaskArrives(t *testing.T) {
	d := newDispatcher(t, 2) // slow limit ⌈2/4⌉ = 1, medium ⌈2/2⌉ = 1
	def := enqueue(t, d, "a", 0)
	if s := waitStart(t, def); s.Timeout != 30*time.Second {
		t.Fatalf("default start timeout = %v, want 30s (slow) on an idle server", s.Timeout)
	}
	slow := enqueue(t, d, "b", 30*time.Second)
	if u := next(t, def); u.Shorten != 3*time.Second {
		t.Fatalf("default's update = %+v, want a downgrade to fast (medium limit reached too)", u)
	}
	if s := waitStart(t, slow); s.Timeout != 30*time.Second {
		t.Fatalf("slow start = %+v", s)
	}
}

func TestInteractiveTaskDeniedWhenNoBackendIsFree(t *testing.T) {
	d := newDispatcher(t, 1)
	waitStart(t, enqueue(t, d, "a", 3*time.Second))
	if _, err := d.StartInteractive("b"); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("StartInteractive = %v, want ErrNoBackend", err)
	}
}

func TestInteractiveTaskHaltedWhenQueuedTaskNeedsItsBackend(t *testing.T) {
	d := newDispatcher(t, 1)
	shell, err := d.StartInteractive("a")
	if err != nil {
		t.Fatal(err)
	}
	if s := waitStart(t, shell); s.Timeout != 0 {
		t.Fatalf("interactive start = %+v, want no tier limit", s)
	}
	task := enqueue(t, d, "b", 3*time.Second)
	if u := next(t, shell); u.End != HaltedText {
		t.Fatalf("shell update = %+v, want halted", u)
	}
	waitStart(t, task)
	d.Release(shell, false) // the session's late report changes nothing
	if snap, _ := d.Snapshot(); snap.Tiers[0].Running != 1 {
		t.Fatalf("running = %d after the halted shell's release, want 1", snap.Tiers[0].Running)
	}
}

func TestQueueCapsRefuseWithQueueFull(t *testing.T) {
	d := newDispatcher(t, 0) // nothing starts: every task stays queued
	for range 3 {
		enqueue(t, d, "greedy", 3*time.Second)
	}
	if _, err := d.Enqueue("greedy", 3*time.Second); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("4th task of one client: %v, want ErrQueueFull", err)
	}
	last := enqueue(t, d, "other", 3*time.Second)
	if _, err := d.Enqueue("third", 3*time.Second); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("5th task overall: %v, want ErrQueueFull", err)
	}
	d.Release(last, false)
	enqueue(t, d, "third", 3*time.Second) // a leaving client frees its place
}

func TestUnknownTimeoutIsRefused(t *testing.T) {
	d := newDispatcher(t, 1)
	if _, err := d.Enqueue("a", 5*time.Second); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("Enqueue(5s) = %v, want ErrInvalidLimit", err)
	}
}

func TestRunningTaskEndsWhenItsBackendGoesAway(t *testing.T) {
	d := newDispatcher(t, 1)
	tk := enqueue(t, d, "a", 3*time.Second)
	waitStart(t, tk)
	if err := d.RemoveBackend("b0"); err != nil {
		t.Fatal(err)
	}
	if u := next(t, tk); u.End != BackendLostText {
		t.Fatalf("update = %+v, want backend lost", u)
	}
}

func TestClientLeavingTheQueueLetsTheNextStart(t *testing.T) {
	d := newDispatcher(t, 1)
	running := enqueue(t, d, "a", 3*time.Second)
	waitStart(t, running)
	gone := enqueue(t, d, "b", 3*time.Second)
	waiting := enqueue(t, d, "c", 3*time.Second)
	d.Release(gone, false)
	d.Release(running, true)
	if s := waitStart(t, waiting); s.BackendID != "b0" {
		t.Fatalf("start = %+v", s)
	}
	if snap, _ := d.Snapshot(); snap.Queues[0].Queued != 0 {
		t.Fatalf("queued = %d, want 0", snap.Queues[0].Queued)
	}
}

func TestEstimatesAreResentWhileQueued(t *testing.T) {
	d, err := NewDispatcher(DispatcherConfig{EstimateEvery: 5 * time.Millisecond, EstimateResend: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-d.stopped }()
	go d.Run(ctx)
	tk, err := d.Enqueue("a", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if u := next(t, tk); u.Estimate == nil || u.Estimate.Known {
			t.Fatalf("update = %+v, want an unknown estimate (no backends)", u)
		}
	}
}

// nextEstimate waits for the ticket's next estimate.
func nextEstimate(t *testing.T, tk *Ticket) Estimate {
	t.Helper()
	u := next(t, tk)
	if u.Estimate == nil {
		t.Fatalf("ticket %s: update %+v, want an estimate", tk.ID(), u)
	}
	return *u.Estimate
}

func TestQueuedTasksAreToldTheirPositionAndWhenItMoves(t *testing.T) {
	// No backends and no periodic resend: the wait stays unknown, so any
	// message after the first is due to a position change.
	d := startDispatcher(t, DispatcherConfig{EstimateEvery: 5 * time.Millisecond, EstimateResend: time.Hour}, 0)
	tasks := make([]*Ticket, 3)
	for i := range tasks {
		tasks[i] = enqueue(t, d, fmt.Sprint("client", i), 3*time.Second)
		if e := nextEstimate(t, tasks[i]); e.Position != i {
			t.Fatalf("task %d told position %d on joining, want %d", i, e.Position, i)
		}
	}
	d.Release(tasks[0], false)
	for i, tk := range tasks[1:] {
		if e := nextEstimate(t, tk); e.Position != i {
			t.Fatalf("task %d told position %d after the first left, want %d", i+1, e.Position, i)
		}
	}
}
