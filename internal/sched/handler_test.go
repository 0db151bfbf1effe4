package sched

import (
	"math"
	"math/rand/v2"
	"testing"
	"testing/quick"
	"time"
)

// A snoozed attempt does not count: a job allowed one attempt snoozes
// twice and still runs, with the same attempt number, after each wait.
func TestSnoozeDelaysWithoutCountingTheAttempt(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 1})
	h.submit(JobSpec{ID: "j", Queue: "q"})
	for range 2 {
		wantIDs(t, "pull", h.pull("agent", 1), "j")
		ack := h.s.Snooze("j", 1, 5*time.Second)
		h.check()
		if ack.Ignored || !ack.Retrying || !ack.RetryAt.Equal(h.clk.Now().Add(5*time.Second)) {
			t.Fatalf("Snooze = %+v, want a wake-up 5 s from now", ack)
		}
		if h.state("j") != stateDelayed {
			t.Fatalf("state after snooze = %d, want delayed", h.state("j"))
		}
		wantIDs(t, "pull while snoozed", h.pull("agent", 1))
		if got := h.s.NextDeadline(); !got.Equal(ack.RetryAt) && got.After(ack.RetryAt) {
			t.Fatalf("NextDeadline = %v, after the wake-up %v", got, ack.RetryAt)
		}
		leaseTick(h, 5*time.Second)
	}
	wantIDs(t, "pull after the snoozes", h.pull("agent", 1), "j")
	if ack := h.complete("j", FailedAttempt); ack.Retrying {
		t.Fatalf("the first counted attempt failed and was retried: %+v; want failed (max 1 attempt)", ack)
	}
	if got := h.s.Counters().Snoozes; got != 2 {
		t.Errorf("Snoozes = %d, want 2", got)
	}
}

func TestSnoozeOfAStaleAttemptIsIgnored(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 3})
	h.submit(JobSpec{ID: "j", Queue: "q"})
	h.pull("agent", 1)
	if ack := h.s.Snooze("j", 2, time.Second); !ack.Ignored {
		t.Fatalf("Snooze of attempt 2 while 1 runs = %+v, want ignored", ack)
	}
	if ack := h.s.Snooze("nope", 1, time.Second); !ack.Ignored {
		t.Fatalf("Snooze of an unknown job = %+v, want ignored", ack)
	}
	if h.state("j") != stateRunning {
		t.Fatalf("state = %d, want still running", h.state("j"))
	}
}

func TestSnoozeWithoutDelayQueuesAtOnce(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{})
	h.submit(JobSpec{ID: "j", Queue: "q"})
	h.pull("agent", 1)
	h.s.Snooze("j", 1, 0)
	h.check()
	wantIDs(t, "pull", h.pull("agent", 1), "j")
}

// FailedFinal ends a job whose policy would retry it.
func TestFailedFinalIsNotRetried(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 5})
	h.submit(JobSpec{ID: "j", Queue: "q"})
	h.pull("agent", 1)
	if ack := h.complete("j", FailedFinal); ack.Retrying || ack.Ignored {
		t.Fatalf("FailedFinal ack = %+v, want final", ack)
	}
	if h.s.jobs.get("j") != nil {
		t.Fatal("the job is still known after a final failure")
	}
	if got := h.s.Counters().Failed; got != 1 {
		t.Errorf("Failed = %d, want 1", got)
	}
}

func TestBackoffCeilingByPolicy(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name string
		p    RetryPolicy
		want []time.Duration // after attempts 1, 2, 3, 4
	}{
		{"exponential", RetryPolicy{Backoff: s}, []time.Duration{s, 2 * s, 4 * s, 8 * s}},
		{"exponential capped", RetryPolicy{Backoff: s, MaxBackoff: 3 * s}, []time.Duration{s, 2 * s, 3 * s, 3 * s}},
		{"linear", RetryPolicy{Policy: BackoffLinear, Backoff: s}, []time.Duration{s, 2 * s, 3 * s, 4 * s}},
		{"linear capped", RetryPolicy{Policy: BackoffLinear, Backoff: s, MaxBackoff: 2 * s}, []time.Duration{s, 2 * s, 2 * s, 2 * s}},
		{"constant", RetryPolicy{Policy: BackoffConstant, Backoff: s}, []time.Duration{s, s, s, s}},
		{"none", RetryPolicy{Policy: BackoffLinear}, []time.Duration{0, 0, 0, 0}},
	} {
		for i, want := range c.want {
			if got := c.p.ceiling(i + 1); got != want {
				t.Errorf("%s: wait after attempt %d = %s, want %s", c.name, i+1, got, want)
			}
		}
	}
}

// Property: full jitter keeps every exponential wait in
// [0, min(max, base·2^(n-1))], and the waits spread over that range.
func TestJitteredExponentialBackoffStaysInRange(t *testing.T) {
	h := newHarness(t, nil, 7)
	prop := func(baseMs uint16, capMs uint32, n uint8) bool {
		p := RetryPolicy{Backoff: time.Duration(baseMs) * time.Millisecond,
			MaxBackoff: time.Duration(capMs) * time.Millisecond, Jitter: true}
		if p.MaxBackoff < p.Backoff {
			p.MaxBackoff = 0
		}
		attempt := int(n%40) + 1
		limit := min(float64(p.Backoff)*math.Pow(2, float64(attempt-1)), float64(maxWait))
		if p.MaxBackoff > 0 {
			limit = min(limit, float64(p.MaxBackoff))
		}
		d := h.s.backoff(p, attempt)
		return d >= 0 && float64(d) <= limit
	}
	cfg := &quick.Config{MaxCount: 5000, Rand: nil}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
	// Spread: with base 1 s after attempt 3 (ceiling 4 s), 4000 draws
	// land in each quarter of [0, 4 s] about 1000 times.
	p := RetryPolicy{Backoff: time.Second, Jitter: true}
	var quarters [4]int
	for range 4000 {
		d := h.s.backoff(p, 3)
		quarters[min(int(d/time.Second), 3)]++
	}
	for q, n := range quarters {
		if n < 850 || n > 1150 {
			t.Errorf("quarter %d got %d of 4000 draws, want about 1000: %v", q, n, quarters)
		}
	}
}

// The same seed gives the same waits: randomness comes only from
// Config.Rand.
func TestJitterComesFromTheInjectedSource(t *testing.T) {
	draw := func() []time.Duration {
		s, err := New(Config{Now: newClock().Now, Rand: rand.New(rand.NewPCG(3, 4))})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]time.Duration, 8)
		for i := range out {
			out[i] = s.backoff(RetryPolicy{Backoff: time.Minute, Jitter: true}, i+1)
		}
		return out
	}
	a, b := draw(), draw()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("two schedulers with one seed drew %v and %v", a, b)
		}
	}
}

func TestInvalidBackoffIsRefused(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{})
	bad := RetryPolicy{Policy: BackoffConstant + 1, Backoff: time.Second}
	wantErr(t, h.s.Submit(JobSpec{ID: "j", Queue: "q", Retry: &bad}), ErrInvalidJob)
	wantErr(t, h.s.Submit(JobSpec{ID: "j", Queue: "q", Backoff: &bad}), ErrInvalidJob)
	wantErr(t, h.s.Submit(JobSpec{ID: "j", Queue: "q", Timeout: -time.Second}), ErrInvalidJob)
	wantErr(t, h.s.DefineQueue(QueueSpec{Name: "bad", Retry: bad}), ErrInvalidJob)
	if h.s.jobs.get("j") != nil || h.s.queue("bad") != nil {
		t.Fatal("a refused job or queue was kept")
	}
}

// limitHarness enforces time limits with a grace of a tenth, at least
// 5 s; the agent renews its lease throughout.
func limitHarness(t *testing.T, retry RetryPolicy) *harness {
	t.Helper()
	clk := newClock()
	grace := func(limit time.Duration) time.Duration { return max(5*time.Second, limit/10) }
	s, err := New(Config{Tiers: threeTiers(1, 1), Now: clk.Now, Grace: grace, Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, s: s, clk: clk}
	h.queue(QueueSpec{Name: "q", Retry: retry})
	h.worker(WorkerSpec{ID: "agent", Slots: 2, LeaseTTL: time.Hour})
	return h
}

// A job past its own timeout plus grace is failed by the server even
// though its agent renews, and retried by its policy; NextDeadline names
// that moment exactly.
func TestTimeLimitFailsARunningJobAtLimitPlusGrace(t *testing.T) {
	h := limitHarness(t, RetryPolicy{MaxAttempts: 2})
	h.submit(JobSpec{ID: "j", Queue: "q", Tier: slow, Timeout: 20 * time.Second})
	start := h.clk.Now()
	wantIDs(t, "pull", h.pull("agent", 1), "j")
	if got, want := h.s.NextDeadline(), start.Add(25*time.Second); !got.Equal(want) {
		t.Fatalf("NextDeadline = %v, want the limit 20 s + grace 5 s = %v", got, want)
	}
	h.clk.advance(25*time.Second - time.Nanosecond)
	_ = h.s.Renew("agent")
	h.s.Tick()
	h.check()
	if h.state("j") != stateRunning {
		t.Fatal("the job ended before its limit and grace")
	}
	h.clk.advance(time.Nanosecond)
	h.s.Tick()
	h.check()
	ev := h.s.Events()
	if len(ev) != 2 || ev[0].Kind != EventTimedOut || ev[0].WorkerID != "agent" || ev[0].Attempt != 1 ||
		ev[1].Kind != EventRetrying || !ev[1].TimedOut {
		t.Fatalf("events = %+v, want timed-out then retrying", ev)
	}
	wantIDs(t, "pull of the retry", h.pull("agent", 1), "j")
	h.clk.advance(25 * time.Second)
	h.s.Tick()
	h.check()
	ev = h.s.Events()
	if len(ev) != 2 || ev[1].Kind != EventFailed || !ev[1].TimedOut {
		t.Fatalf("events of the last attempt = %+v, want timed-out then failed", ev)
	}
	if got := h.s.Counters().TimeLimits; got != 2 {
		t.Errorf("TimeLimits = %d, want 2", got)
	}
}

// Without its own timeout a job's limit is its tier's duration; a job
// that completes in time leaves no deadline behind.
func TestTimeLimitOfTheTierAndNoneAfterCompletion(t *testing.T) {
	h := limitHarness(t, RetryPolicy{})
	h.submit(JobSpec{ID: "a", Queue: "q", Tier: slow}, JobSpec{ID: "b", Queue: "q"})
	start := h.clk.Now()
	h.pull("agent", 2)
	if got, want := h.s.NextDeadline(), start.Add(3*time.Second+5*time.Second); !got.Equal(want) {
		t.Fatalf("NextDeadline = %v, want fast tier 3 s + grace 5 s = %v", got, want)
	}
	h.complete("b", Succeeded)
	if got, want := h.s.NextDeadline(), start.Add(30*time.Second+5*time.Second); !got.Equal(want) {
		t.Fatalf("NextDeadline = %v, want slow tier 30 s + grace 5 s = %v", got, want)
	}
	h.complete("a", Succeeded)
	if got := h.s.NextDeadline(); !got.IsZero() && got.Before(start.Add(time.Hour)) {
		t.Fatalf("NextDeadline = %v after every job ended; want only the lease's", got)
	}
	if len(h.events(EventTimedOut)) != 0 {
		t.Fatal("a job that completed in time timed out")
	}
}

// Without Config.Grace the core enforces no limits (the Asymptote service
// enforces its own).
func TestNoTimeLimitsWithoutGrace(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{})
	h.submit(JobSpec{ID: "j", Queue: "q", Timeout: time.Second})
	h.pull("agent", 1)
	for range 5 {
		leaseTick(h, leaseTTL/2)
		_ = h.s.Renew("agent")
	}
	if h.state("j") != stateRunning {
		t.Fatal("a job timed out without Config.Grace")
	}
}

// A job's own backoff replaces its queue's backoff but keeps the queue's
// attempts.
func TestOwnBackoffOverTheQueuePolicy(t *testing.T) {
	h := leaseHarness(t, RetryPolicy{MaxAttempts: 2, Backoff: time.Hour})
	h.submit(JobSpec{ID: "j", Queue: "q", Backoff: &RetryPolicy{Policy: BackoffConstant, Backoff: 3 * time.Second}})
	h.pull("agent", 1)
	ack := h.complete("j", FailedAttempt)
	if !ack.Retrying || !ack.RetryAt.Equal(h.clk.Now().Add(3*time.Second)) {
		t.Fatalf("ack = %+v, want a retry in 3 s (the job's own constant backoff)", ack)
	}
	leaseTick(h, 3*time.Second)
	h.pull("agent", 1)
	if ack := h.complete("j", FailedAttempt); ack.Retrying {
		t.Fatalf("ack = %+v, want failed after the queue's 2 attempts", ack)
	}
}
