package sched

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Leases: a running job belongs to its worker while the worker renews its
// lease. Agent "agent" pulls with a lease of leaseTTL; backend "b1" is a
// push worker without a lease that picks up whatever the lapse frees.

const leaseTTL = 10 * time.Second

// leaseHarness has tiers fast / medium (limit 1) / slow (limit 1), one queue
// "q" with the given retry policy, the leased agent and the backend.
func leaseHarness(t *testing.T, retry RetryPolicy) *harness {
	t.Helper()
	h := newHarness(t, threeTiers(1, 1), 1)
	h.queue(QueueSpec{Name: "q", Retry: retry})
	h.worker(WorkerSpec{ID: "agent", Slots: 1, LeaseTTL: leaseTTL})
	h.backends(1)
	return h
}

// tick advances the clock and applies it.
func leaseTick(h *harness, d time.Duration) {
	h.t.Helper()
	h.clk.advance(d)
	h.s.Tick()
	h.check()
}

// leaseResources are what a running job holds; in each case the waiter
// needs what the holder holds, and nothing else keeps it from starting.
var leaseResources = []struct {
	name           string
	holder, waiter JobSpec
	setup          func(t *testing.T, h *harness)
}{
	{name: "tier slot",
		holder: JobSpec{ID: "holder", Queue: "q", Tier: slow},
		waiter: JobSpec{ID: "waiter", Queue: "q", Tier: slow}},
	{name: "key",
		holder: JobSpec{ID: "holder", Queue: "q", Keys: []string{"net:k"}},
		waiter: JobSpec{ID: "waiter", Queue: "q", Keys: []string{"net:k"}},
		setup:  func(t *testing.T, h *harness) { sqSetLimit(t, h, "net:k", 1) }},
	{name: "group",
		holder: JobSpec{ID: "holder", Queue: "q", Group: "db"},
		waiter: JobSpec{ID: "waiter", Queue: "q", Group: "db"}},
	{name: "write share",
		holder: JobSpec{ID: "holder", Queue: "q", Mode: ModeWrite, Group: "w"},
		waiter: JobSpec{ID: "waiter", Queue: "q", Mode: ModeRead, Group: "r"}},
	{name: "read share",
		holder: JobSpec{ID: "holder", Queue: "q", Mode: ModeRead, Group: "r"},
		waiter: JobSpec{ID: "waiter", Queue: "q", Mode: ModeWrite, Group: "w"}},
}

// leaseFates are the retry policies and the event each gives a job whose
// lease lapsed on its first attempt.
var leaseFates = []struct {
	name  string
	retry RetryPolicy
	event EventKind
}{
	{"retried", RetryPolicy{MaxAttempts: 2}, EventRetrying},
	{"failed", RetryPolicy{MaxAttempts: 1}, EventFailed},
}

func TestLapsedLeaseReleasesResourcesAndRetriesOrFailsByPolicy(t *testing.T) {
	for _, res := range leaseResources {
		for _, fate := range leaseFates {
			t.Run(res.name+"/"+fate.name, func(t *testing.T) {
				h := leaseHarness(t, fate.retry)
				if res.setup != nil {
					res.setup(t, h)
				}
				h.submit(res.holder)
				wantIDs(t, "agent pulls", h.pull("agent", 1), "holder")
				h.submit(res.waiter)
				wantIDs(t, "while the holder runs", h.dispatch())

				leaseTick(h, leaseTTL)
				wantLeaseEvents(t, h.s.Events(), fate.event)
				wantNothingHeld(t, h.s.Snapshot())
				wantIDs(t, "right after the lapse", h.dispatch(), "waiter")
				wantHolderFate(t, h, fate.event)
			})
		}
	}
}

// wantLeaseEvents checks the lapse is reported, then the holder's fate.
func wantLeaseEvents(t *testing.T, evs []Event, fate EventKind) {
	t.Helper()
	if len(evs) != 2 {
		t.Fatalf("events %+v, want lease-expired then %v", evs, fate)
	}
	if e := evs[0]; e.Kind != EventLeaseExpired || e.WorkerID != "agent" {
		t.Fatalf("first event %+v, want lease-expired of agent", e)
	}
	if e := evs[1]; e.Kind != fate || e.JobID != "holder" || e.WorkerID != "agent" || e.Attempt != 1 {
		t.Fatalf("second event %+v, want %v of holder's attempt 1 on agent", e, fate)
	}
}

// wantNothingHeld checks no tier slot, key, group or mode share is held.
func wantNothingHeld(t *testing.T, snap Snapshot) {
	t.Helper()
	if snap.Running != 0 || snap.Reads != 0 || snap.Writes != 0 {
		t.Fatalf("after the lapse: running %d, reads %d, writes %d; want all 0", snap.Running, snap.Reads, snap.Writes)
	}
	for _, tier := range snap.Tiers {
		if tier.Running != 0 || tier.Counted != 0 {
			t.Fatalf("tier %s still counts %+v", tier.Name, tier)
		}
	}
	for _, k := range slices.Concat(snap.Keys, snap.Groups) {
		if k.Running != 0 {
			t.Fatalf("%s still held: %+v", k.Key, k)
		}
	}
}

// wantHolderFate checks a retried holder runs again as attempt 2 once the
// waiter is done, and a failed one is gone.
func wantHolderFate(t *testing.T, h *harness, fate EventKind) {
	t.Helper()
	if fate == EventFailed {
		if h.state("holder") != stateDone {
			t.Fatalf("failed holder is in state %d, want gone", h.state("holder"))
		}
		return
	}
	if h.state("holder") != stateQueued {
		t.Fatalf("retried holder is in state %d, want queued", h.state("holder"))
	}
	h.complete("waiter", Succeeded)
	as := h.s.Dispatch()
	h.check()
	if len(as) != 1 || as[0].JobID != "holder" || as[0].Attempt != 2 {
		t.Fatalf("after the waiter: %+v, want holder's attempt 2", as)
	}
}

func TestLapsedLeaseWaitsOutTheRetryBackoff(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 3, Backoff: 4 * time.Second})
	h.submit(JobSpec{ID: "j1", Queue: "q"})
	wantIDs(t, "agent pulls", h.pull("agent", 1), "j1")
	leaseTick(h, leaseTTL)
	evs := h.events(EventRetrying)
	if len(evs) != 1 || !evs[0].At.Equal(h.clk.Now().Add(4*time.Second)) {
		t.Fatalf("retry events %+v, want one at now+4s", evs)
	}
	wantIDs(t, "during the backoff", h.dispatch())
	leaseTick(h, 4*time.Second)
	wantIDs(t, "after the backoff", h.dispatch(), "j1")
}

func TestRenewKeepsLeaseAlive(t *testing.T) {
	renewals := []struct {
		name  string
		renew func(h *harness) error
	}{
		{"Renew", func(h *harness) error { return h.s.Renew("agent") }},
		{"Pull", func(h *harness) error { _, err := h.s.Pull("agent", 0); return err }},
		{"AddWorker again", func(h *harness) error {
			return h.s.AddWorker(WorkerSpec{ID: "agent", Slots: 1, LeaseTTL: leaseTTL})
		}},
	}
	for _, r := range renewals {
		t.Run(r.name, func(t *testing.T) {
			h := leaseHarness(t, RetryPolicy{})
			h.submit(JobSpec{ID: "j1", Queue: "q"})
			wantIDs(t, "agent pulls", h.pull("agent", 1), "j1")
			h.clk.advance(6 * time.Second)
			if err := r.renew(h); err != nil {
				t.Fatal(err)
			}
			leaseTick(h, leaseTTL-time.Nanosecond) // past the first lease, within the renewed one
			if evs := h.s.Events(); len(evs) != 0 || h.state("j1") != stateRunning {
				t.Fatalf("renewed lease lapsed: events %+v, j1 state %d", evs, h.state("j1"))
			}
			leaseTick(h, time.Nanosecond)
			if evs := h.events(EventLeaseExpired); len(evs) != 1 {
				t.Fatalf("lease did not lapse at the renewed end: %+v", evs)
			}
		})
	}
}

func TestRenewUnknownWorkerFails(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{})
	wantErr(t, h.s.Renew("ghost"), ErrUnknownWorker)
}

func TestLeaseWithoutTTLNeverLapses(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{})
	h.submit(JobSpec{ID: "j1", Queue: "q"})
	wantIDs(t, "backend runs", h.dispatch(), "j1")
	leaseTick(h, 365*24*time.Hour)
	for _, e := range h.s.Events() {
		if e.WorkerID == "b1" || e.JobID == "j1" {
			t.Fatalf("event %+v: a worker without a lease must keep its job", e)
		}
	}
	if h.state("j1") != stateRunning || len(h.s.Snapshot().Workers) != 1 {
		t.Fatalf("j1 state %d, workers %+v; want j1 running on b1", h.state("j1"), h.s.Snapshot().Workers)
	}
}

func TestIgnoredCompletionChangesNothing(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, h *harness)
		id      string
		attempt int
		outcome Outcome
	}{
		{"success reported twice", leaseSucceedJ1, "j1", 1, Succeeded},
		{"failure reported twice while the retry waits", leaseFailJ1, "j1", 1, FailedAttempt},
		{"success after a failure was reported", leaseFailJ1, "j1", 1, Succeeded},
		{"unknown job", leaseRunJ1, "ghost", 1, Succeeded},
		{"job that never started", func(t *testing.T, h *harness) {
			h.submit(JobSpec{ID: "j1", Queue: "q", Tier: slow}, JobSpec{ID: "j2", Queue: "q", Tier: slow})
			wantIDs(t, "start", h.dispatch(), "j1")
		}, "j2", 1, Succeeded},
		{"attempt not yet run", leaseRunJ1, "j1", 2, Succeeded},
		{"stale success after the lease lapsed, retry waiting", leaseLapseJ1, "j1", 1, Succeeded},
		{"stale success after the lease lapsed and the job re-ran", leaseRerunJ1, "j1", 1, Succeeded},
		{"stale failure after the lease lapsed and the job re-ran", leaseRerunJ1, "j1", 1, FailedAttempt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := leaseHarness(t, RetryPolicy{MaxAttempts: 3, Backoff: time.Minute})
			c.prepare(t, h)
			h.s.Events()
			before := freezeState(h)
			ack := h.s.Complete(c.id, c.attempt, c.outcome)
			h.check()
			if ack != (Ack{Ignored: true}) {
				t.Fatalf("ack %+v, want ignored", ack)
			}
			if after := freezeState(h); !reflect.DeepEqual(before, after) {
				t.Fatalf("state changed:\nbefore %+v\nafter  %+v", before, after)
			}
			if evs := h.s.Events(); len(evs) != 0 {
				t.Fatalf("ignored completion emitted %+v", evs)
			}
		})
	}
}

func leaseRunJ1(t *testing.T, h *harness) {
	h.submit(JobSpec{ID: "j1", Queue: "q"})
	wantIDs(t, "agent pulls", h.pull("agent", 1), "j1")
}

func leaseSucceedJ1(t *testing.T, h *harness) {
	leaseRunJ1(t, h)
	if ack := h.complete("j1", Succeeded); ack.Ignored {
		t.Fatalf("first report ignored")
	}
}

func leaseFailJ1(t *testing.T, h *harness) {
	leaseRunJ1(t, h)
	if ack := h.complete("j1", FailedAttempt); !ack.Retrying {
		t.Fatalf("first failure: %+v, want a retry", ack)
	}
}

// leaseLapseJ1 lets j1's first attempt lapse with the agent's lease; the
// retry waits out its backoff.
func leaseLapseJ1(t *testing.T, h *harness) {
	leaseRunJ1(t, h)
	leaseTick(h, leaseTTL)
	if h.state("j1") != stateDelayed {
		t.Fatalf("j1 state %d after the lapse, want delayed", h.state("j1"))
	}
}

// leaseRerunJ1 lets j1's first attempt lapse with the agent's lease and
// runs attempt 2 on the backend.
func leaseRerunJ1(t *testing.T, h *harness) {
	leaseLapseJ1(t, h)
	leaseTick(h, time.Minute)
	as := h.s.Dispatch()
	h.check()
	if len(as) != 1 || as[0].Attempt != 2 || as[0].WorkerID != "b1" {
		t.Fatalf("rerun %+v, want j1's attempt 2 on b1", as)
	}
}

func TestCurrentAttemptCompletesAfterStaleReportWasIgnored(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 3, Backoff: time.Minute})
	leaseRerunJ1(t, h)
	if ack := h.s.Complete("j1", 1, Succeeded); !ack.Ignored {
		t.Fatalf("stale report: %+v, want ignored", ack)
	}
	if ack := h.s.Complete("j1", 2, Succeeded); ack.Ignored {
		t.Fatalf("current report ignored")
	}
	h.check()
	if c := h.s.Counters(); c.Succeeded != 1 || c.Retried != 1 {
		t.Fatalf("counters %+v, want one success after one retry", c)
	}
}

func TestNextDeadlineReportsEarliestLeaseEndOrRetryWakeUp(t *testing.T) {
	h := newHarness(t, nil, 1)
	t0 := h.clk.Now()
	h.queue(QueueSpec{Name: "q", Retry: RetryPolicy{MaxAttempts: 2, Backoff: 2 * time.Second}})
	leaseWantDeadline(t, h, time.Time{}, "no worker, no retry")
	h.worker(WorkerSpec{ID: "forever", Slots: 1})
	leaseWantDeadline(t, h, time.Time{}, "a worker without a lease")
	h.worker(WorkerSpec{ID: "long", Slots: 1, LeaseTTL: 10 * time.Second})
	leaseWantDeadline(t, h, t0.Add(10*time.Second), "one lease")

	h.clk.advance(time.Second)
	h.worker(WorkerSpec{ID: "short", Slots: 1, LeaseTTL: 5 * time.Second})
	leaseWantDeadline(t, h, t0.Add(6*time.Second), "the earlier of two leases")

	h.submit(JobSpec{ID: "j1", Queue: "q"})
	wantIDs(t, "short pulls", h.pull("short", 1), "j1")
	h.clk.advance(time.Second)
	h.complete("j1", FailedAttempt)
	leaseWantDeadline(t, h, t0.Add(4*time.Second), "a retry wakes before any lease ends")

	leaseTick(h, 2*time.Second)
	if h.state("j1") != stateQueued {
		t.Fatalf("j1 state %d after its backoff, want queued", h.state("j1"))
	}
	leaseWantDeadline(t, h, t0.Add(6*time.Second), "retry woken")
	if err := h.s.Renew("short"); err != nil {
		t.Fatal(err)
	}
	leaseWantDeadline(t, h, t0.Add(9*time.Second), "short renewed at t0+4s")
	leaseTick(h, 5*time.Second)
	leaseWantDeadline(t, h, t0.Add(10*time.Second), "short lapsed at t0+9s")
}

func leaseWantDeadline(t *testing.T, h *harness, want time.Time, when string) {
	t.Helper()
	if got := h.s.NextDeadline(); !got.Equal(want) {
		t.Fatalf("%s: NextDeadline %v, want %v", when, got, want)
	}
}

// A driver that rebuilds its state after a restart submits a job with the
// attempts it already had: numbering goes on from there and the earlier
// attempts count toward the retry policy.
func TestRestoredJobKeepsItsAttempts(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 3})
	h.submit(JobSpec{ID: "j", Queue: "q", Attempts: 2})
	got, err := h.s.Pull("agent", 1)
	if err != nil || len(got) != 1 || got[0].Attempt != 3 {
		t.Fatalf("Pull = %+v, %v; want job j at attempt 3", got, err)
	}
	if ack := h.s.Complete("j", 3, FailedAttempt); ack.Ignored || ack.Retrying {
		t.Fatalf("Complete of the third of three attempts = %+v; want the job failed", ack)
	}
	if err := h.s.Submit(JobSpec{ID: "k", Queue: "q", Attempts: -1}); !errors.Is(err, ErrInvalidJob) {
		t.Fatalf("Submit with Attempts -1 = %v; want ErrInvalidJob", err)
	}
	h.check()
}

// A released attempt goes back to the queue as if it never started: its
// slot frees, the next attempt has the same number, and a stale report
// of it is ignored.
func TestReleasedAttemptDoesNotCount(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 1})
	h.submit(JobSpec{ID: "j", Queue: "q"}, JobSpec{ID: "k", Queue: "q"})
	got := h.pull("agent", 1)
	if !h.s.Release("j", 1) {
		t.Fatal("Release of the running attempt = false")
	}
	h.check()
	if h.s.Release("j", 1) || h.s.Release("nope", 1) {
		t.Fatal("Release of a job that is not running = true")
	}
	if again := h.pull("agent", 1); !slices.Equal(got, []string{"j"}) || !slices.Equal(again, []string{"k"}) {
		t.Fatalf("after releasing j the agent got %v; want k, which was ready before j came back", again)
	}
	h.complete("k", Succeeded)
	as, err := h.s.Pull("agent", 1)
	if err != nil || len(as) != 1 || as[0].JobID != "j" || as[0].Attempt != 1 {
		t.Fatalf("Pull = %+v, %v; want j at attempt 1 again", as, err)
	}
	if c := h.s.Counters(); c.Started != 2 {
		t.Fatalf("Started = %d; want 2 (the released attempt does not count)", c.Started)
	}
}

// A job restored while it waited out a retry's backoff stays delayed
// until NotBefore, then joins its queue; one whose time passed is ready.
func TestRestoredJobWaitsUntilNotBefore(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 3})
	h.submit(JobSpec{ID: "later", Queue: "q", Attempts: 1, NotBefore: h.clk.Now().Add(5 * time.Second)},
		JobSpec{ID: "past", Queue: "q", Attempts: 1, NotBefore: h.clk.Now().Add(-time.Second)})
	if got := h.pull("agent", 1); !slices.Equal(got, []string{"past"}) {
		t.Fatalf("pull = %v; want only the job whose backoff ended", got)
	}
	h.complete("past", Succeeded)
	if st := h.state("later"); st != stateDelayed {
		t.Fatalf("later is %v; want delayed", st)
	}
	if next, want := h.s.NextDeadline(), h.clk.Now().Add(5*time.Second); !next.Equal(want) {
		t.Fatalf("NextDeadline = %v; want the delayed job's time %v", next, want)
	}
	leaseTick(h, 5*time.Second)
	if got := h.pull("agent", 1); !slices.Equal(got, []string{"later"}) {
		t.Fatalf("after its time pull = %v; want later", got)
	}
}
