package asyqueue

import (
	"errors"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/sched"
)

// Each core event gets the queue protocol's one reaction, whichever mode
// drives the core.
func TestReactions(t *testing.T) {
	tiers := sched.DefaultTiers()
	cases := []struct {
		name string
		e    sched.Event
		ok   bool
		want Reaction
	}{
		{"downgrade", sched.Event{Kind: sched.EventDowngraded, JobID: "7", Tier: 0, Duration: 3 * time.Second}, true,
			Reaction{Note: dashboard.Event{Kind: "downgrade", Task: "7", Detail: "slow → fast"}, Shorten: 3 * time.Second, Tier: 0}},
		{"halt", sched.Event{Kind: sched.EventHalted, JobID: "7"}, true,
			Reaction{Note: dashboard.Event{Kind: "halt", Task: "7", Detail: "its backend was needed for queued tasks"}, End: HaltedText}},
		{"failed", sched.Event{Kind: sched.EventFailed, JobID: "7"}, true, Reaction{End: BackendLostText}},
		{"cancelled", sched.Event{Kind: sched.EventCancelled, JobID: "7"}, true, Reaction{End: BackendLostText}},
		{"retrying", sched.Event{Kind: sched.EventRetrying, JobID: "7"}, true, Reaction{End: BackendLostText, Cancel: true}},
		{"stopped", sched.Event{Kind: sched.EventStopped, JobID: "7"}, false, Reaction{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := React(c.e, tiers, "slow")
			if ok != c.ok || got != c.want {
				t.Fatalf("React = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// The caps refuse a task past the total or past its client's share, and
// a task that leaves makes room for its client again.
func TestWaitingCaps(t *testing.T) {
	w := NewWaiting(Caps{MaxQueued: 3, MaxQueuedPerClient: 2})
	steps := []struct {
		client string
		total  int
		want   error
	}{
		{"a", 0, nil},
		{"a", 1, nil},
		{"a", 2, ErrQueueFull}, // a's share is full
		{"b", 2, nil},
		{"c", 3, ErrQueueFull}, // the queue is full
	}
	for i, s := range steps {
		if err := w.Admit(s.client, s.total); !errors.Is(err, s.want) {
			t.Fatalf("step %d: Admit(%s, %d) = %v, want %v", i, s.client, s.total, err, s.want)
		}
	}
	if !w.ClientFull("a") || w.ClientFull("b") {
		t.Fatalf("ClientFull: a %v, b %v; want a full, b not", w.ClientFull("a"), w.ClientFull("b"))
	}
	w.Leave("a")
	if err := w.Admit("a", 2); err != nil {
		t.Fatalf("after a task of a left: %v", err)
	}
	if d := NewWaiting(Caps{}).caps; d.MaxQueued != DefaultMaxQueued || d.MaxQueuedPerClient != DefaultMaxQueuedPerClient {
		t.Fatalf("zero caps = %+v, want the defaults", d)
	}
}

// A task whose run the core would retry ends for its client with
// BackendLostText and leaves the core, so a backend that comes back runs
// the next task, not a task nobody waits for. The Asymptote queue never
// retries, so this test gives it a retry policy: an injected fault, since
// the real configuration cannot produce the event.
func TestRetryingTaskEndsAndLeavesTheCore(t *testing.T) {
	d := newDispatcher(t, 1)
	if err := d.do(func() {
		if err := d.core.DefineQueue(sched.QueueSpec{Name: QueueName, Retry: sched.RetryPolicy{MaxAttempts: 3}}); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	first := enqueue(t, d, "a", 3*time.Second)
	waitStart(t, first)
	if err := d.RemoveBackend("b0"); err != nil {
		t.Fatal(err)
	}
	if u := next(t, first); u.End != BackendLostText {
		t.Fatalf("update = %+v, want the end %q", u, BackendLostText)
	}
	d.Release(first, false)
	if err := d.AddBackend("b1", idleBackend{}); err != nil {
		t.Fatal(err)
	}
	second := enqueue(t, d, "a", 3*time.Second)
	if s := waitStart(t, second); s.BackendID != "b1" {
		t.Fatalf("the next task started on %q, want b1", s.BackendID)
	}
	snap, err := d.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if q := snap.Queues[0]; q.Queued+q.Delayed != 0 || q.Running != 1 {
		t.Fatalf("core queue %+v: want only the second task, running", q)
	}
}

// A failed task is the server's fault only for the texts the server ends
// it with; anything asy says, even mentioning a backend, is the figure's.
func TestServerFault(t *testing.T) {
	for _, c := range []struct {
		text string
		want bool
	}{
		{BackendLostText, true},
		{HaltedText, true},
		{ErrStopped.Error(), true},
		{RedisDownText, true},
		{TaskLostText, true},
		{"backend local-1 is gone", true},
		{"backend remote-2 could not start the task: dial: refused", true},
		{"Time limit exceeded", false},
		{"Asymptote exited with status 1", false},
		{"Backend of the figure", false},
		{"", false},
	} {
		if got := ServerFault(c.text); got != c.want {
			t.Errorf("ServerFault(%q) = %v; want %v", c.text, got, c.want)
		}
	}
}
