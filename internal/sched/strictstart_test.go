package sched

import (
	"testing"
	"time"
)

// Strict start (docs/design.md, "Exclusive read/write groups and strict
// order"): a strict queue with StrictStart hands out its next job only
// once the holder of the previous one confirmed it started, or that
// attempt ended in any way.
func TestStrictStartWaitsForTheConfirmation(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(h *harness, id string) // what frees the gate
	}{
		{"confirmed", func(h *harness, id string) {
			if !h.s.Confirm(id, 1) {
				h.t.Fatalf("Confirm(%s) refused", id)
			}
		}},
		{"completed", func(h *harness, id string) { h.complete(id, Succeeded) }},
		{"failed", func(h *harness, id string) { h.complete(id, FailedAttempt) }},
		{"released", func(h *harness, id string) { h.s.Release(id, 1) }},
		{"cancelled", func(h *harness, id string) {
			if err := h.s.Cancel(id); err != nil {
				h.t.Fatal(err)
			}
		}},
		{"lease lapsed", func(h *harness, id string) {
			h.clk.advance(time.Minute)
			h.s.Tick()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil, 1)
			h.queue(QueueSpec{Name: "q", Order: OrderStrict, StrictStart: true})
			h.worker(WorkerSpec{ID: "a", Slots: 5, LeaseTTL: 10 * time.Second})
			h.worker(WorkerSpec{ID: "b", Slots: 5})
			h.submit(JobSpec{ID: "1", Queue: "q"}, JobSpec{ID: "2", Queue: "q"}, JobSpec{ID: "3", Queue: "q"})
			wantIDs(t, "a's pull", h.pull("a", 5), "1") // one at a time
			wantIDs(t, "b's pull before 1 started", h.pull("b", 5))
			c.end(h, "1")
			h.check()
			wantIDs(t, "b's pull after", h.pull("b", 5), "2")
			wantIDs(t, "another pull before 2 started", h.pull("b", 5))
		})
	}
}

// Without StrictStart a strict queue hands out its jobs in order at once;
// a confirmation of a stale or unknown attempt is refused and changes
// nothing; turning StrictStart off opens the gate.
func TestStrictStartOffAndStaleConfirmations(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "q", Order: OrderStrict})
	h.worker(WorkerSpec{ID: "a", Slots: 5})
	h.submit(JobSpec{ID: "1", Queue: "q"}, JobSpec{ID: "2", Queue: "q"}, JobSpec{ID: "3", Queue: "q"}, JobSpec{ID: "4", Queue: "q"})
	wantIDs(t, "plain strict", h.pull("a", 2), "1", "2")
	h.queue(QueueSpec{Name: "q", Order: OrderStrict, StrictStart: true})
	wantIDs(t, "strict start", h.pull("a", 5), "3")
	if h.s.Confirm("3", 2) || h.s.Confirm("nope", 1) || h.s.Confirm("4", 1) {
		t.Fatal("a confirmation of a stale, unknown or queued attempt was accepted")
	}
	h.check()
	wantIDs(t, "still gated", h.pull("a", 5))
	h.queue(QueueSpec{Name: "q", Order: OrderStrict})
	wantIDs(t, "gate off", h.pull("a", 5), "4")
	for range 2 {
		if !h.s.Confirm("3", 1) {
			t.Fatal("confirming the running attempt (again) was refused")
		}
	}
	h.check()
}
