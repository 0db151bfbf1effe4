package sched

import (
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Prioritized queues, agents with capabilities, per-key limits, batches and
// random choice (docs/design.md, "Per-key limits, priorities and random picks").
// Agents are pull workers; "a1" has many slots unless a test says otherwise,
// so that slots never explain a refusal.

// sqHarness returns a harness with default tiers, the given queues and one
// pull agent "a1" with the given capabilities and 100 slots.
func sqHarness(t *testing.T, seed uint64, caps []string, queues ...QueueSpec) *harness {
	t.Helper()
	h := newHarness(t, nil, seed)
	for _, q := range queues {
		h.queue(q)
	}
	h.worker(WorkerSpec{ID: "a1", Slots: 100, Capabilities: caps})
	return h
}

// sqJob is a fast job of a queue holding the given limit keys.
func sqJob(id, queue string, keys ...string) JobSpec {
	return JobSpec{ID: id, Queue: queue, Keys: keys}
}

// sqQueueOf returns the queue each job was pulled from, in order.
func sqQueueOf(h *harness, worker string, n int) []string {
	h.t.Helper()
	as, err := h.s.Pull(worker, n)
	if err != nil {
		h.t.Fatalf("Pull(%s, %d): %v", worker, n, err)
	}
	h.check()
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Queue
	}
	return out
}

func TestHighestPriorityQueueWithReadyWorkAlwaysWins(t *testing.T) {
	// Two low queues tie at priority 1, so a wrong pick would show up under
	// some seed; the queue of priority 5 must win under every one.
	for seed := uint64(1); seed <= 50; seed++ {
		h := sqHarness(t, seed, nil,
			QueueSpec{Name: "low-a", Priority: 1}, QueueSpec{Name: "low-b", Priority: 1},
			QueueSpec{Name: "mid", Priority: 3}, QueueSpec{Name: "high", Priority: 5})
		h.submit(sqJob("la", "low-a"), sqJob("lb", "low-b"), sqJob("m", "mid"), sqJob("h", "high"))
		wantIDs(t, "first pull", h.pull("a1", 1), "h")
		wantIDs(t, "second pull", h.pull("a1", 1), "m")
	}
}

func TestHighestPriorityQueueWinsForPushWorkers(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "low", Priority: 1})
	h.queue(QueueSpec{Name: "high", Priority: 9})
	h.submit(sqJob("l1", "low"), sqJob("l2", "low"), sqJob("h1", "high"))
	h.backends(1)
	wantIDs(t, "one free backend", h.dispatch(), "h1")
}

func TestEqualPrioritiesAreChosenAtRandom(t *testing.T) {
	chosen := map[string]int{}
	for seed := uint64(1); seed <= 200; seed++ {
		h := sqHarness(t, seed, nil, QueueSpec{Name: "x", Priority: 2}, QueueSpec{Name: "y", Priority: 2})
		h.submit(sqJob("x1", "x"), sqJob("y1", "y"))
		got := sqQueueOf(h, "a1", 1)
		if len(got) != 1 {
			t.Fatalf("seed %d: pulled %v, want one job", seed, got)
		}
		chosen[got[0]]++
		if chosen["x"] > 0 && chosen["y"] > 0 {
			return
		}
	}
	t.Fatalf("over 200 seeds only %v was chosen; ties must be broken at random", chosen)
}

func TestEqualPrioritiesAreChosenAtRandomWithinOneScheduler(t *testing.T) {
	h := sqHarness(t, 7, nil, QueueSpec{Name: "x", Priority: 2}, QueueSpec{Name: "y", Priority: 2})
	for i := 0; i < 200; i++ {
		h.submit(sqJob("x"+itoa(i), "x"), sqJob("y"+itoa(i), "y"))
	}
	chosen := map[string]int{}
	for i := 0; i < 200; i++ {
		for _, q := range sqQueueOf(h, "a1", 1) {
			chosen[q]++
		}
		h.complete(sqFirstRunning(h), Succeeded)
	}
	if chosen["x"] == 0 || chosen["y"] == 0 {
		t.Fatalf("200 pulls from two tied queues chose %v; want both", chosen)
	}
}

// sqFirstRunning returns the id of a running job (the test runs one at a time).
func sqFirstRunning(h *harness) string {
	h.t.Helper()
	for id, j := range h.s.jobs.all() {
		if j.state == stateRunning {
			return id
		}
	}
	h.t.Fatalf("no running job")
	return ""
}

func TestQueueIsServedOnlyToWorkerWithAllRequiredCapabilities(t *testing.T) {
	cases := []struct {
		name     string
		requires []string
		offers   []string
		served   bool
	}{
		{"all required offered", []string{"nmap", "ipv6"}, []string{"ipv6", "nmap"}, true},
		{"more offered than required", []string{"nmap"}, []string{"nmap", "ipv6", "gpu"}, true},
		{"one required missing", []string{"nmap", "ipv6"}, []string{"nmap"}, false},
		{"nothing offered", []string{"nmap"}, nil, false},
		{"empty requirement, nothing offered", nil, nil, true},
		{"empty requirement, something offered", nil, []string{"gpu"}, true},
		{"duplicated requirement", []string{"nmap", "nmap"}, []string{"nmap"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := sqHarness(t, 1, c.offers, QueueSpec{Name: "scan", Requires: c.requires})
			h.submit(sqJob("j1", "scan"))
			got := h.pull("a1", 5)
			if served := len(got) > 0; served != c.served {
				t.Fatalf("requires %v, offers %v: pulled %v, want served=%v", c.requires, c.offers, got, c.served)
			}
		})
	}
}

func TestQueueIsPushedOnlyToBackendWithAllRequiredCapabilities(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "gpu", Requires: []string{"gpu"}})
	h.worker(WorkerSpec{ID: "plain", Slots: 1, Push: true})
	h.submit(sqJob("g1", "gpu"))
	wantIDs(t, "without a gpu backend", h.dispatch())
	h.worker(WorkerSpec{ID: "card", Slots: 1, Push: true, Capabilities: []string{"gpu"}})
	as := h.s.Dispatch()
	h.check()
	if len(as) != 1 || as[0].WorkerID != "card" {
		t.Fatalf("assignments %+v, want g1 on card", as)
	}
}

func TestWorkerGetsHighestPriorityQueueItCanServe(t *testing.T) {
	h := sqHarness(t, 1, []string{"tcp"},
		QueueSpec{Name: "udp", Priority: 9, Requires: []string{"udp"}},
		QueueSpec{Name: "tcp", Priority: 5, Requires: []string{"tcp"}},
		QueueSpec{Name: "any", Priority: 1})
	h.submit(sqJob("u1", "udp"), sqJob("t1", "tcp"), sqJob("n1", "any"))
	wantIDs(t, "first pull", h.pull("a1", 1), "t1")
	wantIDs(t, "second pull", h.pull("a1", 1), "n1")
	wantIDs(t, "third pull", h.pull("a1", 1))
}

func TestKeyLimitHoldsAcrossAllQueues(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "q1", Priority: 2})
	h.queue(QueueSpec{Name: "q2", Priority: 1})
	if err := h.s.SetKeyLimit("net:k", 2); err != nil {
		t.Fatal(err)
	}
	h.submit(sqJob("a1", "q1", "net:k"), sqJob("a2", "q1", "net:k"), sqJob("a3", "q1", "net:k"),
		sqJob("b1", "q2", "net:k"), sqJob("b2", "q2", "net:k", "net:other"), sqJob("c1", "q2", "net:other"))
	h.backends(10)

	wantIDs(t, "key k fills", h.dispatch(), "a1", "a2", "c1")
	sqWantBlocked(t, h, "q1", "net:k", 1)
	sqWantBlocked(t, h, "q2", "net:k", 2)
	sqWantKeyUsage(t, h, "net:k", 2, 2)

	h.complete("a1", Succeeded)
	wantIDs(t, "one holder drains", h.dispatch(), "a3")
	h.complete("a2", Succeeded)
	h.complete("a3", Succeeded)
	wantIDs(t, "key drains, q2 restarts", h.dispatch(), "b1", "b2")
	sqWantBlocked(t, h, "q2", "net:k", 0)
}

// sqWantBlocked checks how many queued jobs of a queue the key holds back.
func sqWantBlocked(t *testing.T, h *harness, queue, key string, want int) {
	t.Helper()
	for _, q := range h.s.Snapshot().Queues {
		if q.Name == queue {
			if got := q.BlockedBy[key]; got != want {
				t.Fatalf("queue %s: %d jobs blocked by %s, want %d (%+v)", queue, got, key, want, q)
			}
			return
		}
	}
	t.Fatalf("no queue %s in the snapshot", queue)
}

// sqWantKeyUsage checks a key's running holders and limit in the snapshot.
func sqWantKeyUsage(t *testing.T, h *harness, key string, running, limit int) {
	t.Helper()
	for _, k := range h.s.Snapshot().Keys {
		if k.Key == key {
			if k.Running != running || k.Limit != limit {
				t.Fatalf("key %s: %+v, want running %d limit %d", key, k, running, limit)
			}
			return
		}
	}
	t.Fatalf("no key %s in the snapshot", key)
}

func TestKeyLimitHoldsAcrossQueuesForPullingAgents(t *testing.T) {
	h := sqHarness(t, 1, nil, QueueSpec{Name: "q1", Priority: 2}, QueueSpec{Name: "q2", Priority: 1})
	if err := h.s.SetKeyLimit("net:k", 1); err != nil {
		t.Fatal(err)
	}
	h.submit(sqJob("x1", "q1", "net:k"), sqJob("x2", "q1", "net:k"), sqJob("y1", "q2", "net:k"))
	wantIDs(t, "first pull", h.pull("a1", 10), "x1")
	wantIDs(t, "key full", h.pull("a1", 10))
	h.complete("x1", Succeeded)
	wantIDs(t, "after the holder ends", h.pull("a1", 10), "x2")
	h.complete("x2", Succeeded)
	wantIDs(t, "q2 restarts", h.pull("a1", 10), "y1")
}

func TestBatchRequestGetsOneToNJobsEachHandedOutOnce(t *testing.T) {
	for _, order := range []Order{OrderFIFO, OrderStrict, OrderRandom} {
		t.Run(order.String(), func(t *testing.T) {
			h := sqHarness(t, 3, nil,
				QueueSpec{Name: "p", Priority: 2, Order: order, Batch: 3},
				QueueSpec{Name: "r", Priority: 1, Order: order})
			h.worker(WorkerSpec{ID: "a2", Slots: 4})
			h.backends(2)
			const jobs = 90
			for i := 0; i < jobs; i++ {
				h.submit(sqJob("j"+itoa(i), []string{"p", "r"}[i%2]))
			}
			seen := sqHandOutAll(t, h, jobs)
			if len(seen) != jobs {
				t.Fatalf("%d distinct jobs handed out, want %d", len(seen), jobs)
			}
		})
	}
}

// sqHandOutAll lets agents a1 and a2 pull batches of varying size and the
// backends take pushed jobs, completing what runs, until every job was
// handed out. It checks each batch holds 1..N jobs (at most the queue's
// Batch) while jobs are queued, and that no job id is handed out twice.
func sqHandOutAll(t *testing.T, h *harness, jobs int) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for round := 0; len(seen) < jobs && round < 10*jobs; round++ {
		worker, n := []string{"a1", "a2"}[round%2], 1+round%5
		queued := h.s.Snapshot().Queued
		as, err := h.s.Pull(worker, n)
		if err != nil {
			t.Fatal(err)
		}
		h.check()
		if (queued > 0) != (len(as) > 0) || len(as) > n || (len(as) > 0 && as[0].Queue == "p" && len(as) > 3) {
			t.Fatalf("round %d: %d queued, asked %d, got %d jobs %v", round, queued, n, len(as), ids(as))
		}
		if round%3 == 0 {
			as = append(as, h.s.Dispatch()...)
			h.check()
		}
		for _, a := range as {
			if seen[a.JobID] {
				t.Fatalf("job %s handed out twice", a.JobID)
			}
			seen[a.JobID] = true
		}
		for _, a := range as {
			h.complete(a.JobID, Succeeded)
		}
	}
	return seen
}

func TestBatchComesFromOneQueue(t *testing.T) {
	h := sqHarness(t, 1, nil, QueueSpec{Name: "high", Priority: 2}, QueueSpec{Name: "low", Priority: 1})
	h.submit(sqJob("h1", "high"), sqJob("h2", "high"), sqJob("l1", "low"), sqJob("l2", "low"))
	wantIDs(t, "batch of 10", h.pull("a1", 10), "h1", "h2")
	wantIDs(t, "next batch", h.pull("a1", 10), "l1", "l2")
}

func TestBatchNeverExceedsFreeSlots(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "q"})
	h.worker(WorkerSpec{ID: "small", Slots: 2})
	h.submit(sqJob("j1", "q"), sqJob("j2", "q"), sqJob("j3", "q"))
	wantIDs(t, "two slots", h.pull("small", 10), "j1", "j2")
	wantIDs(t, "no slot left", h.pull("small", 10))
}

func TestLimitFivePerSlash24BatchTwoTenTargetsGivesBatchesTwoTwoOneThenNothing(t *testing.T) {
	for _, limitFirst := range []bool{true, false} {
		name := map[bool]string{true: "limit set before submitting", false: "limit set after submitting"}[limitFirst]
		t.Run(name, func(t *testing.T) {
			h := sqHarness(t, 1, nil, QueueSpec{Name: "scan", Order: OrderRandom, Batch: 2})
			if limitFirst {
				sqSetLimit(t, h, "net:*", 5)
			}
			for i := 1; i <= 10; i++ {
				target := "10.20.30." + itoa(i)
				h.submit(sqJob(target, "scan", TargetKey(target)))
			}
			if !limitFirst {
				sqSetLimit(t, h, "net:*", 5)
			}
			sqWantBatches(t, h, 2, 2, 1, 0, 0)
			running := sqRunning(h)
			h.complete(running[0], Succeeded)
			sqWantBatches(t, h, 1, 0)
			sqWantKeyUsage(t, h, "net:10.20.30.0/24", 5, 5)
		})
	}
}

func sqSetLimit(t *testing.T, h *harness, pattern string, limit int) {
	t.Helper()
	if err := h.s.SetKeyLimit(pattern, limit); err != nil {
		t.Fatalf("SetKeyLimit(%s, %d): %v", pattern, limit, err)
	}
	h.check()
}

// sqWantBatches pulls with a large N once per wanted batch size.
func sqWantBatches(t *testing.T, h *harness, sizes ...int) {
	t.Helper()
	var got []int
	for range sizes {
		got = append(got, len(h.pull("a1", 1000)))
	}
	if !slices.Equal(got, sizes) {
		t.Fatalf("batch sizes %v, want %v", got, sizes)
	}
}

// sqRunning lists the running jobs, sorted.
func sqRunning(h *harness) []string {
	var out []string
	for id, j := range h.s.jobs.all() {
		if j.state == stateRunning {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func TestLowerPriorityQueueIsServedOnlyWhenHigherHasNothingReady(t *testing.T) {
	cases := []struct {
		name string
		// prepare fills "high" (priority 2) so that its job "h1" is or is not
		// ready; "low" (priority 1) always holds "l1".
		prepare   func(t *testing.T, h *harness)
		wantFirst string
	}{
		{"higher has ready work", func(t *testing.T, h *harness) {
			h.submit(sqJob("h1", "high"))
		}, "h1"},
		{"higher is empty", func(t *testing.T, h *harness) {}, "l1"},
		{"higher's jobs are all key-blocked", func(t *testing.T, h *harness) {
			sqSetLimit(t, h, "net:busy", 1)
			h.submit(sqJob("holder", "other", "net:busy"))
			wantIDs(t, "holder", h.pull("a1", 1), "holder")
			h.submit(sqJob("h1", "high", "net:busy"), sqJob("h2", "high", "net:busy"))
		}, "l1"},
		{"higher's jobs are all group-blocked", func(t *testing.T, h *harness) {
			h.submit(JobSpec{ID: "holder", Queue: "other", Group: "db"})
			wantIDs(t, "holder", h.pull("a1", 1), "holder")
			h.submit(JobSpec{ID: "h1", Queue: "high", Group: "db"})
		}, "l1"},
		{"higher's jobs wait for dependencies", func(t *testing.T, h *harness) {
			h.submit(sqJob("up", "other"))
			wantIDs(t, "up", h.pull("a1", 1), "up")
			h.submit(JobSpec{ID: "h1", Queue: "high", After: []string{"up"}})
		}, "l1"},
		{"higher is paused", func(t *testing.T, h *harness) {
			h.queue(QueueSpec{Name: "high", Priority: 2, Paused: true})
			h.submit(sqJob("h1", "high"))
		}, "l1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := sqHarness(t, 1, nil, QueueSpec{Name: "high", Priority: 2},
				QueueSpec{Name: "low", Priority: 1}, QueueSpec{Name: "other", Priority: 3})
			c.prepare(t, h)
			h.submit(sqJob("l1", "low"))
			wantIDs(t, "pull", h.pull("a1", 1), c.wantFirst)
		})
	}
}

func TestPausedQueueStartsNothing(t *testing.T) {
	h := sqHarness(t, 1, nil, QueueSpec{Name: "held", Paused: true})
	h.backends(2)
	h.submit(sqJob("p1", "held"), sqJob("p2", "held"))
	wantIDs(t, "dispatch", h.dispatch())
	wantIDs(t, "pull", h.pull("a1", 10))
	snap := h.s.Snapshot()
	if snap.Queued != 2 || !snap.Queues[0].Paused {
		t.Fatalf("snapshot %+v: want 2 queued jobs in a paused queue", snap)
	}
	h.queue(QueueSpec{Name: "held"})
	got := h.dispatch()
	slices.Sort(got)
	wantIDs(t, "after resuming", got, "p1", "p2")
}

func TestPausedQueueDeniesInteractiveTasksWithoutDowngrade(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.queue(QueueSpec{Name: "asy"})
	h.backends(4)
	h.submit(JobSpec{ID: "d1", Queue: "asy", Default: true})
	wantIDs(t, "default task", h.dispatch(), "d1")
	h.queue(QueueSpec{Name: "asy", Paused: true})
	h.s.Events()
	a, err := h.s.StartInteractive(JobSpec{ID: "i1", Queue: "asy"})
	h.check()
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), `"asy"`) {
		t.Fatalf("interactive task in a paused queue: %+v, %v; want ErrDenied naming the queue", a, err)
	}
	if evs := h.s.Events(); len(evs) != 0 {
		t.Fatalf("events %+v: a pause is no lack of slots, nothing to downgrade", evs)
	}
	if h.state("i1") != stateDone || h.s.Snapshot().Interactive != 0 {
		t.Fatalf("i1 state %d: want no trace of the denied task", h.state("i1"))
	}
}

func TestPausedQueueStartsNothingEvenWhenItIsTheOnlyWorkLeft(t *testing.T) {
	h := sqHarness(t, 1, nil, QueueSpec{Name: "held", Priority: 9}, QueueSpec{Name: "open", Priority: 1})
	h.submit(sqJob("p1", "held"), sqJob("o1", "open"))
	h.queue(QueueSpec{Name: "held", Priority: 9, Paused: true})
	wantIDs(t, "pull", h.pull("a1", 10), "o1")
	wantIDs(t, "only paused work left", h.pull("a1", 10))
	if !slices.Equal(sqRunning(h), []string{"o1"}) {
		t.Fatalf("running %v, want only o1", sqRunning(h))
	}
}

func TestKeyLimitExactKeyWinsThenLongestPattern(t *testing.T) {
	type limit struct {
		pattern string
		n       int
	}
	cases := []struct {
		name   string
		limits []limit
		key    string
		want   int
	}{
		{"pattern limits every key it matches", []limit{{"net:*", 2}}, "net:10.0.0.0/24", 2},
		{"exact key wins over pattern", []limit{{"net:*", 2}, {"net:10.0.0.0/24", 1}}, "net:10.0.0.0/24", 1},
		{"exact key of another key does not apply", []limit{{"net:*", 2}, {"net:10.0.0.0/24", 1}}, "net:10.0.1.0/24", 2},
		{"longest pattern wins", []limit{{"net:*", 3}, {"net:10.*", 1}}, "net:10.0.0.0/24", 1},
		{"shorter pattern for the rest", []limit{{"net:*", 3}, {"net:10.*", 1}}, "net:192.168.0.0/24", 3},
		{"limit 0 removes the limit", []limit{{"net:*", 1}, {"net:*", 0}}, "net:10.0.0.0/24", 5},
		{"unmatched key is unlimited", []limit{{"net:*", 1}}, "host:db1", 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := sqHarness(t, 1, nil, QueueSpec{Name: "q"})
			for _, l := range c.limits {
				sqSetLimit(t, h, l.pattern, l.n)
			}
			for i := 0; i < 5; i++ {
				h.submit(sqJob("j"+itoa(i), "q", c.key))
			}
			if got := len(h.pull("a1", 100)); got != c.want {
				t.Fatalf("%d of 5 jobs holding %s started, want %d", got, c.key, c.want)
			}
		})
	}
}

func TestLoweringKeyLimitStopsNothingButHoldsNewJobs(t *testing.T) {
	h := sqHarness(t, 1, nil, QueueSpec{Name: "q"})
	sqSetLimit(t, h, "net:k", 3)
	for i := 0; i < 6; i++ {
		h.submit(sqJob("j"+itoa(i), "q", "net:k"))
	}
	wantIDs(t, "limit 3", h.pull("a1", 100), "j0", "j1", "j2")
	sqSetLimit(t, h, "net:k", 1)
	if got := sqRunning(h); len(got) != 3 {
		t.Fatalf("running %v after lowering the limit, want all 3 still running", got)
	}
	h.complete("j0", Succeeded)
	h.complete("j1", Succeeded)
	wantIDs(t, "still at the new limit", h.pull("a1", 100))
	h.complete("j2", Succeeded)
	wantIDs(t, "below the new limit", h.pull("a1", 100), "j3")
}

// An agent that names the queues it serves gets work only from
// those, by priority among them; the queues' requirements still hold.
func TestWorkerNamingQueuesIsServedOnlyFromThem(t *testing.T) {
	h := sqHarness(t, 1, nil, QueueSpec{Name: "high", Priority: 9}, QueueSpec{Name: "mid", Priority: 5},
		QueueSpec{Name: "low", Priority: 1}, QueueSpec{Name: "gated", Priority: 7, Requires: []string{"nmap"}})
	h.worker(WorkerSpec{ID: "named", Slots: 10, Queues: []string{"low", "mid", "gated"}})
	h.submit(sqJob("h", "high"), sqJob("m", "mid"), sqJob("l", "low"), sqJob("g", "gated"))
	wantIDs(t, "first pull", h.pull("named", 1), "m")
	wantIDs(t, "second pull", h.pull("named", 1), "l")
	wantIDs(t, "third pull", h.pull("named", 1))
	wantIDs(t, "an agent naming no queue", h.pull("a1", 5), "h")
}

// A random queue's set keeps a cancelled job's entry until a pick meets it
// or stale entries outnumber live ones (slotSet): after cancelling most of
// a bucket's jobs, with their slots reused by new jobs of the same bucket,
// every remaining job is handed out exactly once and no cancelled one is.
func TestRandomQueueHandsOutEachJobOnceAfterCancels(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		h := newHarness(t, nil, seed)
		h.queue(QueueSpec{Name: "scan", Order: OrderRandom})
		h.worker(WorkerSpec{ID: "agent", Slots: 1000})
		want := map[string]bool{}
		n := 0
		submit := func(k int) {
			for range k {
				n++
				id := "job-" + itoa(n)
				h.submit(JobSpec{ID: id, Queue: "scan"})
				want[id] = true
			}
		}
		cancel := func(k int) {
			for id := range want {
				if k == 0 {
					return
				}
				if err := h.s.Cancel(id); err != nil {
					t.Fatalf("Cancel(%s): %v", id, err)
				}
				h.check()
				delete(want, id)
				k--
			}
		}
		submit(100)
		cancel(80)
		submit(30) // reuses the cancelled jobs' slots in the same bucket
		cancel(25)
		handOut := func(k int) {
			for _, id := range h.pull("agent", k) {
				if !want[id] {
					t.Fatalf("seed %d: %s handed out (cancelled, or twice)", seed, id)
				}
				delete(want, id)
			}
		}
		handOut(5)
		cancel(10)
		handOut(1000)
		if len(want) != 0 {
			t.Fatalf("seed %d: never handed out: %v", seed, want)
		}
	}
}

// Random picks (docs/design.md, "Per-key limits, priorities and random picks"):
// a random queue starts a random job among those ready, and the draw must stay
// uniform as jobs are added, picked and cancelled (the set swaps its last job
// into every hole): over many seeds, the first pick of four jobs and, after two
// more arrive and one is cancelled, the pick among the four left must each fall
// on every job about equally often.
func TestRandomPickStaysUniformAsJobsComeAndGo(t *testing.T) {
	const trials = 2000
	first, second := make([]int, 4), make([]int, 4)
	for seed := uint64(1); seed <= trials; seed++ {
		h := newHarness(t, nil, seed)
		h.queue(QueueSpec{Name: "scan", Order: OrderRandom})
		h.worker(WorkerSpec{ID: "agent", Slots: 10})
		for _, id := range []string{"a", "b", "c", "d"} {
			h.submit(JobSpec{ID: id, Queue: "scan"})
		}
		got := h.pull("agent", 1)
		first[got[0][0]-'a']++
		h.submit(JobSpec{ID: "e", Queue: "scan"}, JobSpec{ID: "f", Queue: "scan"})
		var left []string
		for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
			if id != got[0] {
				left = append(left, id)
			}
		}
		if err := h.s.Cancel(left[0]); err != nil {
			t.Fatal(err)
		}
		left = left[1:]
		got = h.pull("agent", 1)
		second[slices.Index(left, got[0])]++
	}
	for _, counts := range [][]int{first, second} {
		for i, n := range counts {
			if n < trials/4-100 || n > trials/4+100 { // 5 standard deviations
				t.Fatalf("picks %v of %d: job %d chosen %d times", counts, trials, i, n)
			}
		}
	}
}

// TestRandomBucketPickIsUniformOverTheBucketsAtPickTime: a random queue
// draws its picks ahead of time (when it is defined, then at each pick),
// so its buckets may change between the draw and the pick. The pick must
// still be uniform over the buckets visible when it is made: here four
// buckets appear after the draws, one of them empties and a fifth appears,
// and each of the four buckets then visible must be picked a quarter of
// the time.
func TestRandomBucketPickIsUniformOverTheBucketsAtPickTime(t *testing.T) {
	const trials = 2000
	counts := map[string]int{}
	for seed := uint64(1); seed <= trials; seed++ {
		h := newHarness(t, nil, seed)
		h.queue(QueueSpec{Name: "scan", Order: OrderRandom})
		h.worker(WorkerSpec{ID: "agent", Slots: 10})
		h.submit(JobSpec{ID: "a", Queue: "scan", Keys: []string{"k0"}},
			JobSpec{ID: "b", Queue: "scan", Keys: []string{"k1"}},
			JobSpec{ID: "c", Queue: "scan", Keys: []string{"k2"}},
			JobSpec{ID: "d", Queue: "scan", Keys: []string{"k3"}})
		if err := h.s.Cancel("a"); err != nil { // k0's bucket empties
			t.Fatal(err)
		}
		h.submit(JobSpec{ID: "e", Queue: "scan", Keys: []string{"k4"}})
		first := h.pull("agent", 1)[0]
		if first == "a" {
			t.Fatalf("seed %d: the cancelled job was handed out", seed)
		}
		counts[first]++
	}
	for _, id := range []string{"b", "c", "d", "e"} {
		// Four buckets, each a quarter: 500 ± 5 standard deviations (97).
		if n := counts[id]; n < trials/4-97 || n > trials/4+97 {
			t.Fatalf("picks %v of %d: job %s chosen %d times", counts, trials, id, n)
		}
	}
}

// TestBoundedDrawIsLemiresMap checks the map from a 64-bit draw to [0, n)
// behind random picks drawn ahead: the result is the high word of d·n, and
// exactly the draws whose low word falls below 2^64 mod n are rejected,
// which leaves every result the same number of accepted draws.
func TestBoundedDrawIsLemiresMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ns := []int{1, 2, 3, 7, 10, 64, 1000, 1<<31 - 1, 1 << 40, 1<<62 + 12345}
	ds := []uint64{0, 1, math.MaxUint64, math.MaxUint64 / 2, 1 << 63}
	for range 2000 {
		ds = append(ds, rng.Uint64())
	}
	for _, n := range ns {
		threshold := -uint64(n) % uint64(n) // 2^64 mod n
		for _, d := range ds {
			hi, lo := bits.Mul64(d, uint64(n))
			i, ok := boundedBy(d, n)
			if want := lo >= threshold; ok != want {
				t.Fatalf("boundedBy(%d, %d) ok %v, want %v", d, n, ok, want)
			}
			if ok && (i != int(hi) || i < 0 || i >= n) {
				t.Fatalf("boundedBy(%d, %d) = %d, want %d", d, n, i, hi)
			}
		}
	}
}
