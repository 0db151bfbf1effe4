package sched

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Queue-wait estimates (docs/design.md, "Queue-wait estimates"): unit rules
// first, then a simulation of the tiered compile service under load that
// compares each job's estimate when it joins with the wait it actually had.

// estimates returns the estimates of every queued job of a queue.
func (h *harness) estimates(queue string) []Estimate {
	h.t.Helper()
	es, err := h.s.Estimates(queue, math.MaxInt32)
	if err != nil {
		h.t.Fatalf("Estimates(%s): %v", queue, err)
	}
	return es
}

// waitOf returns the estimated wait of one queued job.
func (h *harness) waitOf(queue, id string) time.Duration {
	h.t.Helper()
	for _, e := range h.estimates(queue) {
		if e.JobID == id {
			if !e.Known {
				h.t.Fatalf("estimate of %s is unknown", id)
			}
			return e.Wait
		}
	}
	h.t.Fatalf("no estimate for %s", id)
	return 0
}

// teach runs n jobs of the given spec for exactly d each, one at a time, so
// that the learned durations know them.
func (h *harness) teach(n int, spec JobSpec, d time.Duration) {
	h.t.Helper()
	for i := range n {
		sp := spec
		sp.ID = "teach-" + sp.ID + "-" + strconv.Itoa(i)
		h.submit(sp)
		wantIDs(h.t, "started", h.dispatch(), sp.ID)
		h.clk.advance(d)
		h.complete(sp.ID, Succeeded)
	}
}

func wantNear(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if diff := got - want; diff < -time.Millisecond || diff > time.Millisecond {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func TestEstimateDependsOnlyOnJobsAhead(t *testing.T) {
	cases := []struct {
		name   string
		behind []JobSpec
	}{
		{"fast jobs behind", []JobSpec{task("x1", fast), task("x2", fast), task("x3", fast)}},
		{"slow and medium jobs behind", []JobSpec{task("x1", slow), task("x2", medium), task("x3", slow)}},
		{"default jobs behind", []JobSpec{deflt("x1"), deflt("x2")}},
		{"a lower-priority queue's jobs", []JobSpec{{ID: "x1", Queue: "low"}, {ID: "x2", Queue: "low", Tier: slow}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := asyHarness(t, 4, 2, 1, 1)
			h.queue(QueueSpec{Name: "low", Priority: -1})
			h.teach(3, task("f", fast), 2*time.Second)
			h.teach(3, task("s", slow), 20*time.Second)
			h.start(task("r1", slow), task("r2", fast), task("r3", fast), task("r4", medium))
			h.clk.advance(500 * time.Millisecond)
			h.submit(task("q1", slow), task("q2", fast), deflt("q3"), task("q4", medium))
			before := h.estimates("asy")
			if before[0].Wait == 0 {
				t.Fatalf("q1 should wait: %+v", before)
			}
			h.submit(c.behind...)
			after := h.estimates("asy")
			if len(after) < len(before) || !slices.Equal(after[:len(before)], before) {
				t.Fatalf("estimates changed by jobs behind:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

func TestEstimateGrowsWhenAJobGoesAhead(t *testing.T) {
	cases := []struct {
		name  string
		ahead JobSpec
	}{
		{"a job of a higher-priority queue", JobSpec{ID: "a", Queue: "high"}},
		{"a higher-priority job of the same queue", JobSpec{ID: "a", Queue: "asy", Priority: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := asyHarness(t, 1, 1, 1, 1)
			h.queue(QueueSpec{Name: "high", Priority: 1})
			h.teach(3, task("f", fast), 2*time.Second)
			h.start(task("r1", fast))
			h.submit(task("q1", fast))
			before := h.waitOf("asy", "q1")
			h.submit(c.ahead)
			if after := h.waitOf("asy", "q1"); after != before+2*time.Second {
				t.Fatalf("q1's estimate went from %v to %v, want 2 s more", before, after)
			}
		})
	}
}

func TestEstimatesUnchangedBySubmissionsUnderLoad(t *testing.T) {
	// In a simulation under load, submitting a job never changes the
	// estimates of the jobs already queued.
	d := newSimDriver(t, estimateSim{seed: 7, slots: 6, jobs: 1500, load: 0.95, mix: compileMix})
	d.checkAhead = true
	d.run(t)
}

func TestEstimateIdleAndNoSlots(t *testing.T) {
	cases := []struct {
		name      string
		backends  int
		job       JobSpec
		wantKnown bool
	}{
		{"fast job on an idle server", 4, task("j", fast), true},
		{"slow job on an idle server", 4, task("j", slow), true},
		{"default job on an idle server", 4, deflt("j"), true},
		{"no backend at all", 0, task("j", fast), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, threeTiers(2, 1), 1)
			h.queue(QueueSpec{Name: "asy"})
			h.backends(c.backends)
			h.submit(c.job)
			es := h.estimates("asy")
			want := []Estimate{{JobID: "j", Known: c.wantKnown}}
			if !slices.Equal(es, want) {
				t.Fatalf("estimates %+v, want %+v", es, want)
			}
		})
	}
}

func TestEstimateFirstQueuedWaitsForEarliestEnd(t *testing.T) {
	h := asyHarness(t, 3, 2, 1, 1)
	h.teach(5, task("f", fast), 2*time.Second)
	h.start(task("r1", fast))
	h.clk.advance(300 * time.Millisecond)
	h.start(task("r2", fast))
	h.clk.advance(300 * time.Millisecond)
	h.start(task("r3", fast))
	h.clk.advance(600 * time.Millisecond) // r1, r2, r3 ran 1.2 s, 0.9 s, 0.6 s
	h.submit(task("q1", fast), task("q2", fast), task("q3", fast), task("q4", fast))
	wantNear(t, "q1 (r1 ends)", h.waitOf("asy", "q1"), 800*time.Millisecond)
	wantNear(t, "q2 (r2 ends)", h.waitOf("asy", "q2"), 1100*time.Millisecond)
	wantNear(t, "q3 (r3 ends)", h.waitOf("asy", "q3"), 1400*time.Millisecond)
	wantNear(t, "q4 (q1 ends)", h.waitOf("asy", "q4"), 2800*time.Millisecond)
}

func TestEstimateUsesExpectedSuccessiveEnds(t *testing.T) {
	cases := []struct {
		name     string
		runs     []time.Duration // taught in this order, ten times over
		backends int
		running  []JobSpec // started just now
		queued   []string
		want     []time.Duration // of queued, in order
	}{
		// Fast runs last 1 s or 2.5 s, half and half: of two jobs that
		// just started, one is expected to have ended after 1 s, though
		// each one's expected end is 1.75 s; the second slot frees at
		// 2.5 s.
		{"running jobs", []time.Duration{time.Second, 2500 * time.Millisecond}, 2,
			[]JobSpec{task("r1", fast), task("r2", fast)},
			[]string{"q1", "q2"}, []time.Duration{time.Second, 2500 * time.Millisecond}},
		// Fast runs last 1 s twice as often as 3 s (mean 5/3 s). q1 and
		// q2 start at once; q3 takes the slot of the first of them to end:
		// after 1 s but for a chance of 1/9, though each one's expected
		// end is 5/3 s. q4 waits for the second end among q1, q2 and q3
		// (1 s or 2 s for 20/27), q5 for the third.
		{"queued jobs that started", []time.Duration{time.Second, time.Second, 3 * time.Second}, 2, nil,
			[]string{"q1", "q2", "q3", "q4", "q5"}, []time.Duration{0, 0, time.Second, 2 * time.Second, 3 * time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := asyHarness(t, c.backends, 1, 1, 1)
			for i := range 10 {
				for k, d := range c.runs {
					h.teach(1, task("f"+strconv.Itoa(i)+"-"+strconv.Itoa(k), fast), d)
				}
			}
			if len(c.running) > 0 {
				h.start(c.running...)
			}
			for _, id := range c.queued {
				h.submit(task(id, fast))
			}
			for i, id := range c.queued {
				wantNear(t, id, h.waitOf("asy", id), c.want[i])
			}
		})
	}
}

func TestEstimatesBadInput(t *testing.T) {
	h := asyHarness(t, 1, 1, 1, 1)
	h.submit(task("a", fast), task("b", fast), task("c", fast))
	_, err := h.s.Estimates("nope", 1)
	wantErr(t, err, ErrUnknownQueue)
	_, err = h.s.Estimates("asy", -1)
	wantErr(t, err, ErrInvalidBatch)
	es, err := h.s.Estimates("asy", 2)
	if err != nil || len(es) != 2 || es[0].JobID != "a" || es[1].JobID != "b" || es[1].Position != 1 {
		t.Fatalf("Estimates(asy, 2) = %+v, %v; want a and b", es, err)
	}
}

func TestLearnedDurations(t *testing.T) {
	cases := []struct {
		name    string
		spec    JobSpec
		runs    []time.Duration // each run once, in order, for the counts below
		counts  []int
		class   int // learned.classes index: tier, or len(tiers) for defaults
		want    time.Duration
		maxDiff time.Duration
	}{
		{"fast runs converge", task("f", fast), []time.Duration{2 * time.Second}, []int{20}, fast, 2 * time.Second, time.Millisecond},
		{"medium runs converge to their mean", task("m", medium),
			[]time.Duration{4 * time.Second, 8 * time.Second}, []int{1, 1}, medium, 6 * time.Second, 20 * time.Millisecond},
		{"late reports are capped at the tier", task("f", fast), []time.Duration{7 * time.Second}, []int{10}, fast, 3 * time.Second, 0},
		{"drift is followed", task("s", slow),
			[]time.Duration{5 * time.Second, 20 * time.Second}, []int{30, 1500}, slow, 20 * time.Second, 100 * time.Millisecond},
		{"default tasks are learned cut at the fast duration", deflt("d"),
			[]time.Duration{20 * time.Second}, []int{5}, 3, 3 * time.Second, 0},
		{"no sample: half the tier", task("f", fast), nil, nil, slow, 15 * time.Second, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := asyHarness(t, 4, 2, 1, 1)
			for i, d := range c.runs {
				for range c.counts[i] {
					h.submit(c.spec)
					wantIDs(t, "started", h.dispatch(), c.spec.ID)
					h.clk.advance(d)
					h.complete(c.spec.ID, Succeeded)
				}
			}
			got := time.Duration(h.s.learned.classes[c.class].mean())
			if diff := got - c.want; diff < -c.maxDiff || diff > c.maxDiff {
				t.Fatalf("learned mean %v, want %v ± %v", got, c.want, c.maxDiff)
			}
			for k, tier := range h.s.Tiers() {
				if m := time.Duration(h.s.learned.classes[k].mean()); m > tier.Duration {
					t.Fatalf("tier %d learned %v, above its duration %v", k, m, tier.Duration)
				}
			}
		})
	}
}

func TestEstimateRespectsTierLimits(t *testing.T) {
	// Six backends: medium limit 3, slow limit 1. Learned: fast 2 s,
	// medium 6 s, slow 20 s. Running after 1 s: s1 (slow), m1 (medium),
	// f1 (fast); three backends are free.
	cases := []struct {
		name    string
		running []JobSpec // started 1 s ago, besides s1, m1 and f1
		queued  []JobSpec
		id      string
		want    time.Duration
	}{
		{"a slow task waits for the slow slot though fast slots are free", nil,
			[]JobSpec{task("q", slow)}, "q", 19 * time.Second},
		{"a fast task behind the blocked slow task starts at once", nil,
			[]JobSpec{task("s2", slow), task("q", fast)}, "q", 0},
		{"a medium task behind the blocked slow task starts at once", nil,
			[]JobSpec{task("s2", slow), task("q", medium)}, "q", 0},
		{"a medium task waits for the medium limit", []JobSpec{task("m2", medium)},
			[]JobSpec{task("q", medium)}, "q", 5 * time.Second},
		{"a second slow task waits for the first queued one to end", nil,
			[]JobSpec{task("s2", slow), task("q", slow)}, "q", 39 * time.Second},
		{"a default task waits like a fast task", []JobSpec{task("f2", fast), task("f3", fast), task("f4", fast)},
			[]JobSpec{deflt("q")}, "q", time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := asyHarness(t, 6, 3, 1, 1)
			h.teach(3, task("f", fast), 2*time.Second)
			h.teach(3, task("m", medium), 6*time.Second)
			h.teach(3, task("s", slow), 20*time.Second)
			h.start(append([]JobSpec{task("s1", slow), task("m1", medium), task("f1", fast)}, c.running...)...)
			h.clk.advance(time.Second)
			h.submit(c.queued...)
			wantNear(t, c.id, h.waitOf("asy", c.id), c.want)
		})
	}
}

func TestEstimateTreatsDefaultsAsFast(t *testing.T) {
	t.Run("a default past the fast duration frees its slot at once", func(t *testing.T) {
		// Two backends run d1 (default, started in slow 5 s ago) and f1
		// (fast, 1 s ago, learned 2 s). A queued job waits for nothing:
		// the cycle downgrades d1 to fast and, past 3 s, stops it at once.
		h := asyHarness(t, 2, 1, 1, 1)
		h.teach(3, task("f", fast), 2*time.Second)
		h.start(deflt("d1"))
		h.clk.advance(4 * time.Second)
		h.start(task("f1", fast))
		h.clk.advance(time.Second)
		h.submit(task("q", fast))
		if got := h.waitOf("asy", "q"); got != 0 {
			t.Fatalf("estimate %v, want 0", got)
		}
		wantIDs(t, "started", h.dispatch())
		wantDowngrade(t, h.events(EventDowngraded), "d1", fast, true)
	})
	t.Run("a default in the slow tier does not hold the slow limit", func(t *testing.T) {
		// d1 runs in slow (the slow limit, 1, is reached). A queued slow
		// task starts at once: the cycle downgrades d1 to medium.
		h := asyHarness(t, 3, 2, 1, 1)
		h.start(deflt("d1"))
		h.clk.advance(time.Second)
		h.submit(task("q", slow))
		if got := h.waitOf("asy", "q"); got != 0 {
			t.Fatalf("estimate %v, want 0", got)
		}
		wantIDs(t, "started", h.dispatch(), "q")
		wantDowngrade(t, h.events(EventDowngraded), "d1", medium, false)
	})
}

func TestEstimateChangedFrom(t *testing.T) {
	base := Estimate{JobID: "j", Wait: 20 * time.Second, Known: true}
	cases := []struct {
		name string
		next Estimate
		want bool
	}{
		{"same", base, false},
		{"half a second later", Estimate{JobID: "j", Wait: 20500 * time.Millisecond, Known: true}, false},
		{"a second, but under a tenth", Estimate{JobID: "j", Wait: 21 * time.Second, Known: true}, false},
		{"a tenth and over a second", Estimate{JobID: "j", Wait: 18 * time.Second, Known: true}, true},
		{"now unknown", Estimate{JobID: "j"}, true},
		{"another job", Estimate{JobID: "k", Wait: 20 * time.Second, Known: true}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.next.ChangedFrom(base); got != c.want {
				t.Fatalf("ChangedFrom = %v, want %v", got, c.want)
			}
		})
	}
}

// A discrete-event simulation of the tiered compile service under load, on a
// virtual clock: push backends with one slot each, the default tiers (fast
// 3 s on every slot, medium 10 s on half, slow 30 s on a quarter), Poisson
// arrivals of a mix of fast, medium, slow and default tasks from a seeded
// PRNG. Each task has a true run time drawn from its class; it runs that
// long or until its tier's duration cuts it. The driver honours downgrades:
// with StopNow it stops the task at once, otherwise the task is cut at the
// new tier's duration from its start. Each job's estimate is read right
// after it is submitted, before the cycle runs.

// estClass is a kind of task in the mix: its share of arrivals, its tier
// (or default) and the range its true run time is drawn from, uniformly.
type estClass struct {
	name   string
	share  float64
	tier   int
	dflt   bool
	lo, hi time.Duration
}

// compileMix: mostly fast compiles, some medium and a few slow ones, and
// default tasks of which most are short and some would run long. Medium
// and slow work stays below their limits (about 80 % and 65 % of them at
// load 0.9).
var compileMix = []estClass{
	{name: "fast", share: 0.60, tier: fast, lo: 300 * time.Millisecond, hi: 3 * time.Second},
	{name: "medium", share: 0.12, tier: medium, lo: 2 * time.Second, hi: 10 * time.Second},
	{name: "slow", share: 0.025, tier: slow, lo: 8 * time.Second, hi: 30 * time.Second},
	{name: "default-short", share: 0.185, dflt: true, lo: 500 * time.Millisecond, hi: 3 * time.Second},
	{name: "default-long", share: 0.07, dflt: true, lo: 3 * time.Second, hi: 30 * time.Second},
}

// exactMix has the same classes with fixed run times: an estimate can then
// be exact, and any error comes from the model's rules, not from chance.
var exactMix = []estClass{
	{name: "fast", share: 0.60, tier: fast, lo: 1700 * time.Millisecond, hi: 1700 * time.Millisecond},
	{name: "medium", share: 0.12, tier: medium, lo: 6 * time.Second, hi: 6 * time.Second},
	{name: "slow", share: 0.025, tier: slow, lo: 19 * time.Second, hi: 19 * time.Second},
	{name: "default-short", share: 0.185, dflt: true, lo: 1500 * time.Millisecond, hi: 1500 * time.Millisecond},
	{name: "default-long", share: 0.07, dflt: true, lo: 20 * time.Second, hi: 20 * time.Second},
}

// estimateSim configures a run of the simulation.
type estimateSim struct {
	seed  uint64
	slots int
	jobs  int
	// load is the offered work as a fraction of all slots, default tasks
	// counted as cut at the fast duration (as they are under load).
	load float64
	mix  []estClass
}

// meanWork is the mean slot time of one arrival in seconds.
func (c estimateSim) meanWork() float64 {
	sum := 0.0
	for _, k := range c.mix {
		lo, hi := k.lo.Seconds(), k.hi.Seconds()
		if k.dflt {
			lo, hi = min(lo, 3), min(hi, 3)
		}
		sum += k.share * (lo + hi) / 2
	}
	return sum
}

// estJob is what the simulation records of a job.
type estJob struct {
	submitted time.Time
	trueRun   time.Duration
	estimate  time.Duration
	known     bool
	position  int // jobs ahead of it in its queue when it joined
	started   bool
	wait      time.Duration
}

// estRun is a running attempt.
type estRun struct {
	attempt    int
	start, end time.Time
	trueRun    time.Duration
}

type estDriver struct {
	s       *Scheduler
	clk     *clock
	rng     *rand.Rand
	cfg     estimateSim
	rate    float64 // arrivals per second
	next    time.Time
	jobs    []estJob
	index   map[string]int
	running map[string]*estRun
	// checkAhead makes every arrival check that it leaves the estimates
	// of the jobs already queued unchanged.
	checkAhead bool
}

func newSimDriver(tb testing.TB, cfg estimateSim) *estDriver {
	tb.Helper()
	clk := newClock()
	s, err := New(Config{Now: clk.Now, Rand: rand.New(rand.NewPCG(cfg.seed, 1))})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.DefineQueue(QueueSpec{Name: "asy"}); err != nil {
		tb.Fatal(err)
	}
	for i := range cfg.slots {
		if err := s.AddWorker(WorkerSpec{ID: "b" + strconv.Itoa(i), Slots: 1, Push: true}); err != nil {
			tb.Fatal(err)
		}
	}
	d := &estDriver{s: s, clk: clk, rng: rand.New(rand.NewPCG(cfg.seed, 2)), cfg: cfg,
		rate: cfg.load * float64(cfg.slots) / cfg.meanWork(), index: map[string]int{}, running: map[string]*estRun{}}
	d.next = clk.t.Add(d.interarrival())
	return d
}

// run plays the simulation until every job has run and returns the jobs.
func (d *estDriver) run(tb testing.TB) []estJob {
	tb.Helper()
	for len(d.jobs) < d.cfg.jobs || len(d.running) > 0 {
		d.step(tb)
	}
	return d.jobs
}

// step moves the clock to the next arrival or end and handles it.
func (d *estDriver) step(tb testing.TB) {
	tb.Helper()
	id, end := d.nextEnd()
	if len(d.jobs) < d.cfg.jobs && (id == "" || !d.next.After(end)) {
		d.clk.t = d.next
		d.arrive(tb)
		d.next = d.next.Add(d.interarrival())
	} else {
		d.clk.t = end
		d.finish(id)
	}
	d.settle(tb)
}

func (d *estDriver) interarrival() time.Duration {
	return time.Duration(d.rng.ExpFloat64() / d.rate * float64(time.Second))
}

// nextEnd returns the running attempt that ends first (ties by id).
func (d *estDriver) nextEnd() (string, time.Time) {
	best, at := "", time.Time{}
	for id, r := range d.running {
		if best == "" || r.end.Before(at) || r.end.Equal(at) && id < best {
			best, at = id, r.end
		}
	}
	return best, at
}

func (d *estDriver) pickClass() estClass {
	u := d.rng.Float64()
	for _, k := range d.cfg.mix {
		if u < k.share {
			return k
		}
		u -= k.share
	}
	return d.cfg.mix[len(d.cfg.mix)-1]
}

// arrive submits a new job and records the estimate it is told at once.
func (d *estDriver) arrive(tb testing.TB) {
	tb.Helper()
	k := d.pickClass()
	id := "j" + strconv.Itoa(len(d.jobs))
	run := k.lo + time.Duration(d.rng.Float64()*float64(k.hi-k.lo))
	var before []Estimate
	if d.checkAhead {
		before = d.estimates(tb)
	}
	d.index[id] = len(d.jobs)
	d.jobs = append(d.jobs, estJob{submitted: d.clk.t, trueRun: run})
	if err := d.s.Submit(JobSpec{ID: id, Queue: "asy", Tier: k.tier, Default: k.dflt}); err != nil {
		tb.Fatal(err)
	}
	after := d.estimates(tb)
	if d.checkAhead && (len(after) != len(before)+1 || !slices.Equal(after[:len(before)], before)) {
		tb.Fatalf("submitting %s changed the estimates ahead of it:\nbefore %+v\nafter  %+v", id, before, after)
	}
	last := after[len(after)-1]
	if last.JobID != id {
		tb.Fatalf("%s is not last in its queue: %+v", id, last)
	}
	j := &d.jobs[len(d.jobs)-1]
	j.estimate, j.known, j.position = last.Wait, last.Known, last.Position
}

func (d *estDriver) estimates(tb testing.TB) []Estimate {
	tb.Helper()
	es, err := d.s.Estimates("asy", math.MaxInt32)
	if err != nil {
		tb.Fatal(err)
	}
	return es
}

// finish reports the end of a running attempt; one cut by its time limit
// counts as failed.
func (d *estDriver) finish(id string) {
	r := d.running[id]
	delete(d.running, id)
	out := Succeeded
	if r.end.Sub(r.start) < r.trueRun {
		out = FailedAttempt
	}
	d.s.Complete(id, r.attempt, out)
}

// settle runs the cycle and carries out what it decides until nothing more
// happens at this instant.
func (d *estDriver) settle(tb testing.TB) {
	tb.Helper()
	for {
		as := d.s.Dispatch()
		for _, a := range as {
			j := &d.jobs[d.index[a.JobID]]
			j.started, j.wait = true, d.clk.t.Sub(j.submitted)
			d.running[a.JobID] = &estRun{attempt: a.Attempt, start: d.clk.t, trueRun: j.trueRun,
				end: d.clk.t.Add(min(j.trueRun, a.Duration))}
		}
		stopped := false
		for _, e := range d.s.Events() {
			if e.Kind != EventDowngraded {
				tb.Fatalf("unexpected event %+v", e)
			}
			r := d.running[e.JobID]
			if e.StopNow {
				r.end = d.clk.t
				d.finish(e.JobID)
				stopped = true
				continue
			}
			r.end = r.start.Add(min(r.trueRun, e.Duration))
		}
		if len(as) == 0 && !stopped {
			return
		}
	}
}

// estimateAccuracy is the figure of merit: the median of |estimate − wait|
// / wait over the jobs after the warm-up that waited at least a second.
type estimateAccuracy struct {
	medianRelErr float64
	counted      int
}

// warmupShare is the share of the first jobs left out of the figure while
// the learned durations settle.
const warmupShare = 0.05

// relErrors returns the relative errors of the jobs of one run that count.
func relErrors(jobs []estJob) []float64 {
	var errs []float64
	for _, j := range jobs[int(warmupShare*float64(len(jobs))):] {
		if j.started && j.wait >= time.Second {
			errs = append(errs, math.Abs(float64(j.estimate-j.wait))/float64(j.wait))
		}
	}
	return errs
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.Inf(1)
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// runEstimateSims runs the simulation once per seed and pools the jobs that
// count.
func runEstimateSims(tb testing.TB, cfg estimateSim, seeds ...uint64) estimateAccuracy {
	tb.Helper()
	var errs []float64
	for _, seed := range seeds {
		cfg.seed = seed
		d := newSimDriver(tb, cfg)
		jobs := d.run(tb)
		for i, j := range jobs {
			if !j.started || !j.known {
				tb.Fatalf("seed %d, job %d: started %v, estimate known %v", seed, i, j.started, j.known)
			}
		}
		errs = append(errs, relErrors(jobs)...)
	}
	return estimateAccuracy{medianRelErr: median(errs), counted: len(errs)}
}

func TestEstimateAccuracyUnderLoad(t *testing.T) {
	cases := []struct {
		name      string
		cfg       estimateSim
		maxErr    float64
		minCounts int
	}{
		{"random run times, load 0.95", estimateSim{seed: 1, slots: 8, jobs: 6000, load: 0.95, mix: compileMix}, 0.15, 3000},
		// At load 0.8 the counted waits are short and spread by chance: a
		// median from the true run-time distributions would err by 0.19
		// (docs/benchmarks.md). The model is at 0.187 with this seed.
		{"random run times, load 0.8", estimateSim{seed: 2, slots: 8, jobs: 20_000, load: 0.8, mix: compileMix}, 0.20, 4000},
		{"fixed run times, load 0.95", estimateSim{seed: 1, slots: 8, jobs: 6000, load: 0.95, mix: exactMix}, 0.05, 3000},
		{"fixed run times, load 0.9", estimateSim{seed: 2, slots: 8, jobs: 6000, load: 0.9, mix: exactMix}, 0.05, 1500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acc := runEstimateSims(t, c.cfg, c.cfg.seed)
			t.Logf("median relative error %.3f over %d jobs", acc.medianRelErr, acc.counted)
			if acc.counted < c.minCounts {
				t.Fatalf("only %d jobs waited at least 1 s: the load is too light", acc.counted)
			}
			if acc.medianRelErr > c.maxErr {
				t.Fatalf("median relative error %.3f, want at most %.2f", acc.medianRelErr, c.maxErr)
			}
		})
	}
}

// medianShare returns, per band of queue positions on joining (band i holds
// positions from[i] up to the next band's), the share of the jobs after
// the warm-up that waited at most their estimate and how many jobs that is.
// Jobs told no wait that had none are left out: they say nothing of the
// estimate's bias.
func medianShare(jobs []estJob, from []int) (share []float64, n []int) {
	share, n = make([]float64, len(from)), make([]int, len(from))
	for _, j := range jobs[int(warmupShare*float64(len(jobs))):] {
		if j.estimate == 0 && j.wait == 0 {
			continue
		}
		b := len(from) - 1
		for b > 0 && j.position < from[b] {
			b--
		}
		n[b]++
		if j.wait <= j.estimate {
			share[b]++
		}
	}
	for b := range share {
		share[b] /= float64(max(n[b], 1))
	}
	return share, n
}

func TestEstimatesAreMedians(t *testing.T) {
	// The estimate is the median of the predicted wait: about half the
	// jobs wait at most what they were told, near the head of the queue
	// and deep in it alike. (A model that gives each queued job the slot
	// of one earlier job for that job's mean run time tells jobs deep in
	// the queue too long a wait: in these runs over 60 % of them, over
	// 70 % with fast tasks only, waited less.)
	fastOnly := []estClass{{name: "fast", share: 1, tier: fast, lo: 300 * time.Millisecond, hi: 3 * time.Second}}
	bands := []int{0, 2, 6}
	cases := []struct {
		name string
		cfg  estimateSim
	}{
		{"compile mix, load 0.8", estimateSim{seed: 3, slots: 8, jobs: 20_000, load: 0.8, mix: compileMix}},
		{"compile mix, load 0.95", estimateSim{seed: 4, slots: 8, jobs: 20_000, load: 0.95, mix: compileMix}},
		{"fast tasks only, load 0.8", estimateSim{seed: 5, slots: 8, jobs: 20_000, load: 0.8, mix: fastOnly}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			share, n := medianShare(newSimDriver(t, c.cfg).run(t), bands)
			for b, from := range bands {
				t.Logf("from position %d: %.3f of %d jobs waited at most their estimate", from, share[b], n[b])
				if n[b] < 500 {
					t.Fatalf("from position %d: only %d jobs", from, n[b])
				}
				if share[b] < 0.4 || share[b] > 0.6 {
					t.Fatalf("from position %d: %.3f of the jobs waited at most their estimate, want 0.4 to 0.6", from, share[b])
				}
			}
		})
	}
}

// BenchmarkEstimateAccuracy runs the simulation of the tiered compile service
// (8 backends, default tiers, compileMix) at three loads, five seeded runs
// of 20,000 jobs each, and reports the median relative error of the
// estimates told on joining over the jobs that waited at least 1 s (the
// first 5 % of each run left out while durations are learned), and how many
// jobs that is. Run with:
//
//	go test -run '^$' -bench BenchmarkEstimateAccuracy ./internal/sched/
func BenchmarkEstimateAccuracy(b *testing.B) {
	for _, load := range []float64{0.8, 0.9, 0.95} {
		b.Run("load="+strconv.FormatFloat(load, 'f', 2, 64), func(b *testing.B) {
			var acc estimateAccuracy
			for range b.N {
				acc = runEstimateSims(b, estimateSim{slots: 8, jobs: 20_000, load: load, mix: compileMix}, 1, 2, 3, 4, 5)
			}
			b.ReportMetric(acc.medianRelErr, "median-rel-err")
			b.ReportMetric(float64(acc.counted), "jobs")
		})
	}
}

// BenchmarkEstimates measures one Estimates call over a queue of the given
// length (a mix of every tier and default tasks) with 64 running jobs on
// 64 backends. Run with:
//
//	go test -run '^$' -bench BenchmarkEstimates$ ./internal/sched/
func BenchmarkEstimates(b *testing.B) {
	for _, queued := range []int{100, 1_000} {
		b.Run("queued="+strconv.Itoa(queued), func(b *testing.B) {
			d := newSimDriver(b, estimateSim{seed: 1, slots: 64, jobs: 2_000, load: 0.9, mix: compileMix})
			for len(d.jobs) < 1_000 {
				d.step(b)
			}
			for i := range queued {
				if err := d.s.Submit(JobSpec{ID: "extra" + strconv.Itoa(i), Queue: "asy", Tier: i % 3, Default: i%4 == 3}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				if _, err := d.s.Estimates("asy", queued); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
