package sched

import (
	"testing"
	"time"
)

// Job records are reused once a job without dependency links is finished.
// Nothing a driver sees may depend on a record after it was reused.

func TestLeaseExpiryEventsNameTheJobEvenAfterItsRecordIsReused(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "q"}) // one attempt: a lost lease fails the job
	h.worker(WorkerSpec{ID: "a", Slots: 2, LeaseTTL: time.Second})
	h.submit(JobSpec{ID: "j1", Queue: "q"}, JobSpec{ID: "j2", Queue: "q"})
	wantIDs(t, "pulled", h.pull("a", 2), "j1", "j2")
	h.clk.advance(2 * time.Second)
	h.s.Tick()
	h.check()
	failed := map[string]bool{}
	for _, e := range h.events(EventFailed) {
		failed[e.JobID] = true
	}
	if !failed["j1"] || !failed["j2"] || len(failed) != 2 {
		t.Fatalf("failed events name %v, want j1 and j2", failed)
	}
}

func TestReusedRecordStartsClean(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "q"})
	h.worker(WorkerSpec{ID: "a", Slots: 1})
	h.submit(JobSpec{ID: "old", Queue: "q", Keys: []string{"k"}, Group: "g", Mode: ModeWrite, Priority: 7})
	wantIDs(t, "pulled", h.pull("a", 1), "old")
	h.complete("old", Succeeded)
	h.submit(JobSpec{ID: "new", Queue: "q"})
	j := h.s.jobs.get("new")
	if j.prio != 0 || j.attempt != 0 || len(j.bucket.gates) != 0 || j.state != stateQueued || j.ext != 0 {
		t.Fatalf("reused record kept state of the old job: %+v", *j)
	}
	wantIDs(t, "pulled", h.pull("a", 1), "new")
	if a := h.complete("new", Succeeded); a.Ignored {
		t.Fatal("completion of the new job ignored")
	}
	if err := h.s.Idle(); err != nil {
		t.Fatal(err)
	}
}
