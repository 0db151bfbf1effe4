package sched

// forecast runs the duration-tier rules forward from now over the running jobs
// and the queued jobs, in queue order, and tells when each queued job starts.
// It is an event sweep: at each time the modelled ends come first, then the
// cycle starts the first queued job that has room in every limit its tier
// counts toward, again and again (with nested limits that is the cycle's
// "ignored for the rest of the cycle"). A started job's end is not a point but
// its learned run-time distribution, as steps; the jobs of one tier form a
// pool, whose r-th end frees a slot in every limit the tier counts toward when
// the expected number of the pool's jobs that have ended reaches r − ½.
//
// A job starts before one ahead of it only while that one is blocked by
// the limit of a slower tier than its own, and that limit frees only with
// an end in that tier or a slower one, which frees a slot in every faster
// limit too: so no job changes the start of a job ahead of it, and the
// starts of one run are every job's estimate at once. The cost is a heap
// operation per end step: every bin of a running job's time left, and
// runStepCount steps per queued job.
type forecast struct {
	now     int64
	limits  []int
	busy    []int     // per limit: started jobs counted toward it, not ended
	pools   []endPool // per tier
	classes []durationClass
	// classSteps[c] is the range in steps of class c's run-time steps,
	// made on first use; {-1, -1} before.
	classSteps [][2]int32
	steps      []step
	ends       timedHeap[endCursor]
	jobs       []forecastJob
	byTier     [][]int32 // per tier: indexes into jobs, in queue order
	next       []int     // per tier: the first entry of byTier not started
}

// endPool is what the forecast knows of the ends of one tier's jobs.
type endPool struct {
	started int     // jobs that started (the running ones included)
	freed   int     // successive ends that occurred
	ended   float64 // expected number of ended jobs by the sweep's time
}

// forecastJob is a queued job in the forecast.
type forecastJob struct {
	start  int64 // -1 until it starts
	class  int32
	tier   int8
	report bool // run returns its start
}

// endCursor walks the end steps of one started job: steps[i] is the
// next one, which happens at its entry's time in the ends heap.
type endCursor struct {
	base int64 // when the job started
	i, n int32
	tier int8
}

// newForecast starts the model with the running jobs, interactive tasks
// left out. A default task counts in the fastest tier, cut at its
// duration: with a queue in front of it, the queue cycle downgrades it to
// fast (a
// default task that ran past that is stopped at once).
func (s *Scheduler) newForecast(now int64) *forecast {
	n := len(s.tiers)
	f := &forecast{now: now, limits: s.limits, busy: make([]int, n), pools: make([]endPool, n),
		classes: s.learned.classes, classSteps: make([][2]int32, len(s.learned.classes)),
		byTier: make([][]int32, n), next: make([]int, n)}
	for c := range f.classSteps {
		f.classSteps[c] = [2]int32{-1, -1}
	}
	running := 0
	for _, r := range s.running {
		running += r
	}
	f.steps = make([]step, 0, running*durationBins+len(f.classSteps)*runStepCount)
	for _, w := range s.workers {
		for _, j := range w.jobs {
			if j.isInteractive() {
				continue
			}
			r := s.run(j)
			c, tier := s.learned.class(j), int(r.tier)
			if j.isDefault() {
				tier = 0
			}
			from := int32(len(f.steps))
			f.steps = c.endSteps(f.steps, float64(now-r.started), c.limit)
			f.begin(now, from, int32(len(f.steps)), tier)
		}
	}
	return f
}

// queue appends a queued job of run-time class c (an index into the learned
// classes) and tier; report says whether run returns its start.
func (f *forecast) queue(c, tier int, report bool) {
	f.jobs = append(f.jobs, forecastJob{start: -1, class: int32(c), tier: int8(tier), report: report})
}

// run sweeps time forward until every queued job has started and returns
// the start of each reported job, in order: -1 when no worker could ever
// run it (a limit it counts toward is 0).
func (f *forecast) run() []int64 {
	pending := 0
	for i, j := range f.jobs {
		if f.canEverRun(int(j.tier)) {
			f.byTier[j.tier] = append(f.byTier[j.tier], int32(i))
			pending++
		}
	}
	for t := f.now; pending > 0; t = f.ends[0].at {
		f.endAt(t)
		if pending -= f.startFitting(t); len(f.ends) == 0 {
			break // every job has ended: all that could start has started
		}
	}
	var out []int64
	for _, j := range f.jobs {
		if j.report {
			out = append(out, j.start)
		}
	}
	return out
}

// canEverRun says whether every limit a job of the tier counts toward is at
// least 1.
func (f *forecast) canEverRun(tier int) bool {
	for k := 0; k <= tier; k++ {
		if f.limits[k] < 1 {
			return false
		}
	}
	return true
}

// begin counts a job of the tier that starts at t, whose end steps are
// steps[from:to].
func (f *forecast) begin(t int64, from, to int32, tier int) {
	for k := 0; k <= tier; k++ {
		f.busy[k]++
	}
	f.pools[tier].started++
	if from < to {
		f.ends.push(t+f.steps[from].at, endCursor{base: t, i: from, n: to, tier: int8(tier)})
	}
}

// endAt takes the end steps that happen at t (none is earlier) and frees
// the slots of the successive ends they complete. Once no step is left,
// every started job has ended.
func (f *forecast) endAt(t int64) {
	for len(f.ends) > 0 && f.ends[0].at <= t {
		e := &f.ends[0]
		c := &e.v
		f.pools[c.tier].ended += f.steps[c.i].p
		if c.i++; c.i < c.n {
			e.at = c.base + f.steps[c.i].at
			f.ends.down(0)
		} else {
			f.ends.pop()
		}
	}
	for tier := range f.pools {
		p := &f.pools[tier]
		for p.freed < p.started && (len(f.ends) == 0 || p.ended >= float64(p.freed)+0.5-1e-9) {
			p.freed++
			for k := 0; k <= tier; k++ {
				f.busy[k]--
			}
		}
	}
}

// startFitting starts at t, one after another, the first queued job whose
// tier has room in every limit it counts toward, and returns how many it
// started. The limits are nested, so the tiers with room are 0..u.
func (f *forecast) startFitting(t int64) int {
	started := 0
	for {
		best, tier := int32(-1), 0
		for u := 0; u < len(f.busy) && f.busy[u] < f.limits[u]; u++ {
			if f.next[u] < len(f.byTier[u]) {
				if i := f.byTier[u][f.next[u]]; best < 0 || i < best {
					best, tier = i, u
				}
			}
		}
		if best < 0 {
			return started
		}
		f.next[tier]++
		j := &f.jobs[best]
		j.start = t
		r := f.runSteps(j.class)
		f.begin(t, r[0], r[1], tier)
		started++
	}
}

// runSteps returns the range in steps of a class's run-time distribution,
// made on first use.
func (f *forecast) runSteps(class int32) [2]int32 {
	if r := f.classSteps[class]; r[0] >= 0 {
		return r
	}
	from := len(f.steps)
	f.steps = f.classes[class].runSteps(f.steps)
	r := [2]int32{int32(from), int32(len(f.steps))}
	f.classSteps[class] = r
	return r
}
