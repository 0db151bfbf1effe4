package sched

import (
	"strconv"
	"testing"
	"time"
)

// rateHarness is a harness with one FIFO queue "q", one pulling agent "a"
// of many slots and a rate on key "api".
func rateHarness(t *testing.T, r Rate) *harness {
	t.Helper()
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "q"})
	h.worker(WorkerSpec{ID: "a", Slots: 10_000})
	if err := h.s.SetKeyRate("api", r); err != nil {
		t.Fatalf("SetKeyRate: %v", err)
	}
	h.check()
	return h
}

func (h *harness) submitN(prefix string, n int, keys ...string) {
	h.t.Helper()
	for i := range n {
		if err := h.s.Submit(JobSpec{ID: prefix + strconv.Itoa(i), Queue: "q", Keys: keys}); err != nil {
			h.t.Fatalf("Submit: %v", err)
		}
	}
	h.check()
}

// A job held back by a rate becomes ready exactly when its token is due:
// not a nanosecond before, and NextDeadline names that time.
func TestRateTokenDueExactly(t *testing.T) {
	h := rateHarness(t, Rate{Count: 10, Per: time.Second, Burst: 1})
	h.submitN("j", 3, "api")
	wantIDs(t, "first pull", h.pull("a", 10), "j0")
	wantIDs(t, "no token left", h.pull("a", 10))
	t0 := h.clk.Now()
	if got, want := h.s.NextDeadline(), t0.Add(100*time.Millisecond); !got.Equal(want) {
		t.Fatalf("NextDeadline %v, want %v", got, want)
	}
	h.clk.advance(100*time.Millisecond - time.Nanosecond)
	h.s.Tick()
	h.check()
	wantIDs(t, "a nanosecond early", h.pull("a", 10))
	h.clk.advance(time.Nanosecond)
	h.s.Tick()
	h.check()
	if got := h.s.NextDeadline(); !got.IsZero() {
		t.Fatalf("NextDeadline %v after the token came, want none", got)
	}
	wantIDs(t, "token due", h.pull("a", 10), "j1")
	// Without a Tick, Dispatch and Pull open what is due themselves.
	h.clk.advance(100 * time.Millisecond)
	wantIDs(t, "pull without a tick", h.pull("a", 10), "j2")
}

// A burst lets that many start at once, then the rate spaces the rest.
func TestRateBurst(t *testing.T) {
	h := rateHarness(t, Rate{Count: 2, Per: time.Second, Burst: 3})
	h.submitN("j", 6, "api")
	wantIDs(t, "burst", h.pull("a", 10), "j0", "j1", "j2")
	h.clk.advance(499 * time.Millisecond)
	wantIDs(t, "before the next token", h.pull("a", 10))
	h.clk.advance(time.Millisecond)
	wantIDs(t, "one token", h.pull("a", 10), "j3")
	h.clk.advance(10 * time.Second)
	wantIDs(t, "refilled to the burst only", h.pull("a", 10), "j4", "j5")
}

// Ten times more work than the rate allows, completed at once, for a
// minute of virtual time: the starts follow the rate exactly, and no
// window holds more than burst + rate·t.
func TestRateHoldsUnderOversubscription(t *testing.T) {
	const perSec, burst, secs = 100, 5, 60
	h := rateHarness(t, Rate{Count: perSec, Per: time.Second, Burst: burst})
	start := h.clk.Now()
	var starts []time.Time
	submitted := 0
	for h.clk.Now().Before(start.Add(secs * time.Second)) {
		// Submit ten times the rate, spread over each second.
		for due := int(h.clk.Now().Sub(start) * 10 * perSec / time.Second); submitted <= due; submitted++ {
			if err := h.s.Submit(JobSpec{ID: "j" + strconv.Itoa(submitted), Queue: "q", Keys: []string{"api"}}); err != nil {
				t.Fatal(err)
			}
		}
		h.s.Tick()
		as, err := h.s.Pull("a", 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			starts = append(starts, h.clk.Now())
			h.s.Complete(a.JobID, a.Attempt, Succeeded)
		}
		// Wake at the next token or the next submission, whichever first.
		next := start.Add(time.Duration(submitted+1) * time.Second / (10 * perSec))
		if d := h.s.NextDeadline(); !d.IsZero() && d.Before(next) {
			next = d
		}
		h.clk.t = next
	}
	h.check()
	if got, want := len(starts), perSec*secs+burst; got < want-1 || got > want {
		t.Fatalf("%d starts in %d s at %d/s burst %d, want %d", got, secs, perSec, burst, want)
	}
	interval := time.Second / perSec
	for i := range starts {
		for j := i + burst; j < len(starts); j++ {
			if n, allowed := j-i+1, burst+int(starts[j].Sub(starts[i])/interval); n > allowed {
				t.Fatalf("%d starts within %v (from start %d), allowed %d", n, starts[j].Sub(starts[i]), i, allowed)
			}
			if j-i > 2*burst {
				break
			}
		}
	}
}

// A pattern's rate applies to each key it matches on its own; an exact
// key's rate wins over the pattern's, and a concurrency limit from
// another pattern applies beside it.
func TestRatePerKeyAndPattern(t *testing.T) {
	h := rateHarness(t, Rate{})
	for _, set := range []struct {
		pattern string
		r       Rate
	}{
		{"api:*", Rate{Count: 1, Per: time.Minute, Burst: 1}},
		{"api:fast", Rate{Count: 1, Per: time.Minute, Burst: 2}},
	} {
		if err := h.s.SetKeyRate(set.pattern, set.r); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.s.SetKeyLimit("api:f*", 1); err != nil {
		t.Fatal(err)
	}
	h.submitN("a", 2, "api:a")
	h.submitN("b", 2, "api:b")
	h.submitN("f", 3, "api:fast")
	wantIDs(t, "one per key, the concurrency limit on api:fast", h.pull("a", 10), "a0", "b0", "f0")
	h.complete("f0", Succeeded)
	wantIDs(t, "api:fast's burst of 2", h.pull("a", 10), "f1")
	h.complete("f1", Succeeded)
	wantIDs(t, "no tokens", h.pull("a", 10))
	snap := h.s.Snapshot()
	for _, k := range snap.Keys {
		if !k.Rated || k.Tokens != 0 || !k.NextToken.Equal(h.clk.Now().Add(time.Minute)) {
			t.Fatalf("key usage %+v, want rated, no tokens, next in a minute", k)
		}
	}
	// Removing the rate opens the key at once.
	if err := h.s.SetKeyRate("api:*", Rate{}); err != nil {
		t.Fatal(err)
	}
	h.check()
	wantIDs(t, "rate removed", h.pull("a", 10), "a1", "b1")
}

// A key gate dropped while its bucket is not full (its queue was removed)
// comes back with the same bucket: removing and re-adding jobs does not
// refill it.
func TestRateSurvivesGateDrop(t *testing.T) {
	h := rateHarness(t, Rate{Count: 1, Per: time.Hour, Burst: 1})
	h.submitN("j", 1, "api")
	wantIDs(t, "first", h.pull("a", 1), "j0")
	h.complete("j0", Succeeded)
	if err := h.s.RemoveQueue("q"); err != nil {
		t.Fatal(err)
	}
	if len(h.s.keyGates) != 0 {
		t.Fatalf("key gates %v survive their queue", h.s.keyGates)
	}
	h.queue(QueueSpec{Name: "q"})
	h.submitN("k", 1, "api")
	wantIDs(t, "same bucket, still empty", h.pull("a", 1))
	h.clk.advance(time.Hour)
	wantIDs(t, "token due", h.pull("a", 1), "k0")
}

// Bad rates are refused and change nothing.
func TestRateBadInput(t *testing.T) {
	h := rateHarness(t, Rate{Count: 1, Per: time.Second, Burst: 1})
	for _, r := range []Rate{
		{Count: 0, Per: time.Second, Burst: 1},
		{Count: 1, Per: 0, Burst: 1},
		{Count: 1, Per: time.Second, Burst: 0},
		{Count: 1, Per: time.Second, Burst: MaxBurst + 1},
		{Count: 2, Per: time.Nanosecond, Burst: 1},
	} {
		wantErr(t, h.s.SetKeyRate("api", r), ErrInvalidRate)
	}
	wantErr(t, h.s.SetKeyRate("", Rate{Count: 1, Per: time.Second, Burst: 1}), ErrInvalidRate)
	h.submitN("j", 2, "api")
	wantIDs(t, "the old rate holds", h.pull("a", 10), "j0")
}

// A key out of tokens holds back only its job at the head of a queue: the
// jobs behind that one start, the queue's snapshot names the key for the
// held job, and NextDeadline names the token's time only once a job waits
// for it.
func TestRateHoldsOnlyTheHead(t *testing.T) {
	h := rateHarness(t, Rate{Count: 1, Per: time.Second, Burst: 1})
	for i, key := range []string{"api", "web", "api", "web"} {
		if err := h.s.Submit(JobSpec{ID: "j" + strconv.Itoa(i), Queue: "q", Keys: []string{key}}); err != nil {
			t.Fatal(err)
		}
	}
	wantIDs(t, "first", h.pull("a", 1), "j0")
	if d := h.s.NextDeadline(); !d.IsZero() {
		t.Fatalf("NextDeadline %v while no job waits for a token", d)
	}
	wantIDs(t, "the api job is passed over", h.pull("a", 10), "j1", "j3")
	h.check()
	if d, want := h.s.NextDeadline(), h.clk.Now().Add(time.Second); !d.Equal(want) {
		t.Fatalf("NextDeadline %v, want %v", d, want)
	}
	for _, q := range h.s.Snapshot().Queues {
		if q.Blocked != 1 || q.BlockedBy["api"] != 1 {
			t.Fatalf("queue usage %+v, want one job held back by api", q)
		}
	}
	h.clk.advance(time.Second)
	h.s.Tick()
	h.check()
	wantIDs(t, "token due", h.pull("a", 10), "j2")
}
