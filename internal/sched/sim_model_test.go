package sched

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// simModel is the randomized simulation's oracle: an independent, naive
// model of what the design says the core must do, built only from the calls
// the test makes and the answers and events the core gives. It predicts
// errors, acknowledgements and events, and judges every assignment against
// the invariants of the rules without looking at the core's own counters.

// simState is a job's state in the model.
type simState uint8

const (
	simWaiting simState = iota + 1
	simDelayed
	simQueued
	simRunning
	simSucceeded
	simEnded // failed, cancelled or halted
)

var simStateNames = [...]string{"", "waiting", "delayed", "queued", "running", "succeeded", "ended"}

func (st simState) String() string { return simStateNames[st] }

func (st simState) live() bool { return st <= simRunning }

// core is the core's state for a live model state.
func (st simState) core() jobState {
	switch st {
	case simWaiting:
		return stateWaiting
	case simDelayed:
		return stateDelayed
	case simQueued:
		return stateQueued
	}
	return stateRunning
}

// simRank is when a job last joined its queue: the operation, and for a
// workflow the position of the job in it. Two jobs of equal priority and
// equal rank joined in an order the test does not know.
type simRank struct{ op, sub int }

// simJob is the model's record of a job.
type simJob struct {
	spec        JobSpec
	interactive bool
	keys        []string // distinct limit keys
	deps        []string // distinct upstream jobs
	dependants  []*simJob
	pending     int
	state       simState
	attempt     int
	worker      *simWorker
	tier        int
	started     time.Time
	wakeAt      time.Time
	rank        simRank
}

// before says whether a must start before b in a queue that keeps order:
// higher priority first (except in a strict queue, which keeps request
// order), then the order in which they joined.
func (a *simJob) before(b *simJob, strict bool) bool {
	if !strict && a.spec.Priority != b.spec.Priority {
		return a.spec.Priority > b.spec.Priority
	}
	if a.rank.op != b.rank.op {
		return a.rank.op < b.rank.op
	}
	return a.rank.sub != 0 && b.rank.sub != 0 && a.rank.sub < b.rank.sub
}

// simWorker is the model's record of a worker.
type simWorker struct {
	spec     WorkerSpec
	running  int
	deadline time.Time // zero: the lease never lapses
}

func (w *simWorker) free() int { return w.spec.Slots - w.running }

// simEvent is an event reduced to what the model predicts.
type simEvent struct {
	kind    EventKind
	job     string
	worker  string
	attempt int
	at      time.Time
}

func (e simEvent) String() string {
	s := e.kind.String()
	if e.job != "" {
		s += " " + e.job
	}
	if e.worker != "" {
		s += " on " + e.worker
	}
	if e.attempt != 0 {
		s += fmt.Sprintf(" attempt %d", e.attempt)
	}
	if !e.at.IsZero() {
		s += " at +" + e.at.Sub(simEpoch).String()
	}
	return s
}

func simEventOf(e Event) simEvent {
	return simEvent{kind: e.Kind, job: e.JobID, worker: e.WorkerID, attempt: e.Attempt, at: e.At}
}

// simEpoch is the virtual clock's start (newClock).
var simEpoch = time.Unix(1_700_000_000, 0)

type simPattern struct {
	prefix string
	limit  int
}

type simModel struct {
	now      func() time.Time
	tiers    []Tier
	queues   map[string]QueueSpec
	workers  map[string]*simWorker
	jobs     map[string]*simJob // every job ever submitted
	live     []*simJob          // submission order; may hold finished jobs
	exact    map[string]int
	patterns []simPattern    // longest prefix first
	rates    map[string]Rate // by pattern, as set
	// Per key with a rate: the rate in force and the starts since it came
	// into force (rateOf, rateStarts).
	rateOf     map[string]Rate
	rateStarts map[string][]time.Time

	tierRunning  []int
	keyHolders   map[string]int
	groupHolders map[string]int
	modeHolders  [3]int

	op, sub  int
	expect   []simEvent // events the current operation must emit
	finished []*simJob  // jobs that finished during the current operation
}

func newSimModel(now func() time.Time, tiers []Tier) *simModel {
	return &simModel{
		now: now, tiers: slices.Clone(tiers),
		queues: map[string]QueueSpec{}, workers: map[string]*simWorker{}, jobs: map[string]*simJob{},
		exact: map[string]int{}, tierRunning: make([]int, len(tiers)),
		rates: map[string]Rate{}, rateOf: map[string]Rate{}, rateStarts: map[string][]time.Time{},
		keyHolders: map[string]int{}, groupHolders: map[string]int{},
	}
}

func (m *simModel) beginOp() {
	m.op++
	m.sub = 0
	m.expect = m.expect[:0]
	m.finished = m.finished[:0]
}

func (m *simModel) expectEvent(e simEvent) { m.expect = append(m.expect, e) }

// liveJobs drops finished jobs from the live list and returns it.
func (m *simModel) liveJobs() []*simJob {
	out := m.live[:0]
	for _, j := range m.live {
		if j.state.live() {
			out = append(out, j)
		}
	}
	clear(m.live[len(out):])
	m.live = out
	return out
}

func (m *simModel) isLive(id string) bool {
	j := m.jobs[id]
	return j != nil && j.state.live()
}

// keyLimit resolves a key's limit as SetKeyLimit documents it: an exact
// limit wins, then the longest matching pattern; none means unlimited.
func (m *simModel) keyLimit(k string) int {
	if n, ok := m.exact[k]; ok {
		return n
	}
	for _, p := range m.patterns {
		if strings.HasPrefix(k, p.prefix) {
			return p.limit
		}
	}
	return math.MaxInt
}

func (m *simModel) setKeyLimit(pattern string, limit int) {
	prefix, isPattern := strings.CutSuffix(pattern, "*")
	if !isPattern {
		if limit > 0 {
			m.exact[pattern] = limit
		} else {
			delete(m.exact, pattern)
		}
		return
	}
	m.patterns = slices.DeleteFunc(m.patterns, func(p simPattern) bool { return p.prefix == prefix })
	if limit > 0 {
		m.patterns = append(m.patterns, simPattern{prefix, limit})
		slices.SortStableFunc(m.patterns, func(a, b simPattern) int { return len(b.prefix) - len(a.prefix) })
	}
}

// keyRate resolves a key's rate as SetKeyRate documents it: an exact
// rate wins, then the one of the longest matching pattern.
func (m *simModel) keyRate(k string) Rate {
	if r, ok := m.rates[k]; ok {
		return r
	}
	best, bestLen := Rate{}, -1
	for p, r := range m.rates {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(k, prefix) && len(prefix) > bestLen {
			best, bestLen = r, len(prefix)
		}
	}
	return best
}

// setKeyRate records a rate; a key whose rate changes starts afresh with
// a full bucket. Rates are kept as one token per interval (Per/Count
// rounded up to a nanosecond), so that 3/3s and 1/1s are the same rate.
func (m *simModel) setKeyRate(pattern string, r Rate) {
	if r == (Rate{}) {
		delete(m.rates, pattern)
	} else {
		interval := (r.Per + time.Duration(r.Count) - 1) / time.Duration(r.Count)
		m.rates[pattern] = Rate{Count: 1, Per: interval, Burst: r.Burst}
	}
	for _, k := range simKeys {
		if now := m.keyRate(k); now != m.rateOf[k] {
			m.rateOf[k] = now
			delete(m.rateStarts, k)
		}
	}
}

// rateBlock says why one more start of key k now would break its rate:
// with one token every interval (Per/Count rounded up to a nanosecond),
// no window may hold more than Burst + its length/interval starts.
func (m *simModel) rateBlock(k string) error {
	r := m.rateOf[k]
	if r == (Rate{}) {
		return nil
	}
	interval := (r.Per + time.Duration(r.Count) - 1) / time.Duration(r.Count)
	starts := m.rateStarts[k]
	now := m.now()
	for i, at := range starts {
		n := len(starts) - i + 1 // the starts from at on, this one included
		if allowed := r.Burst + int(now.Sub(at)/interval); n > allowed {
			return fmt.Errorf("key %s: %d starts within %v, rate %d/%v burst %d allows %d", k, n, now.Sub(at), r.Count, r.Per, r.Burst, allowed)
		}
	}
	return nil
}

// tierLimits derives each tier's limit as Tier documents it: tier 0 is
// every slot, others their Limit or Share of the slots (rounded up, at
// least 1), never above the faster tier's.
func (m *simModel) tierLimits() []int {
	slots := 0
	for _, w := range m.workers {
		slots += w.spec.Slots
	}
	out := make([]int, len(m.tiers))
	for k, t := range m.tiers {
		switch {
		case k == 0:
			out[k] = slots
		case t.Share > 0:
			out[k] = max(1, int(math.Ceil(t.Share*float64(slots))))
		default:
			out[k] = t.Limit
		}
		if k > 0 {
			out[k] = min(out[k], out[k-1])
		}
	}
	return out
}

// counted is the number of running jobs that count toward tier k's limit.
func (m *simModel) counted(k int) int {
	n := 0
	for t := k; t < len(m.tierRunning); t++ {
		n += m.tierRunning[t]
	}
	return n
}

func (m *simModel) policy(j *simJob) RetryPolicy {
	if j.spec.Retry != nil {
		return *j.spec.Retry
	}
	return m.queues[j.spec.Queue].Retry
}

// simBackoff is RetryPolicy's documented wait before attempt n+1:
// Backoff·2^(n-1), at most MaxBackoff when set.
func simBackoff(p RetryPolicy, n int) time.Duration {
	d := p.Backoff
	for i := 1; i < n; i++ {
		d *= 2
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	return d
}

func (m *simModel) makeReady(j *simJob) {
	j.state = simQueued
	j.rank = simRank{m.op, m.sub}
}

// start runs a queued job on w in the given tier.
func (m *simModel) start(j *simJob, w *simWorker, tier int) {
	j.state, j.worker, j.tier, j.started = simRunning, w, tier, m.now()
	j.attempt++
	w.running++
	m.tierRunning[tier]++
	m.hold(j, 1)
}

// release ends a job's running attempt.
func (m *simModel) release(j *simJob) {
	j.worker.running--
	j.worker = nil
	m.tierRunning[j.tier]--
	m.hold(j, -1)
}

func (m *simModel) hold(j *simJob, delta int) {
	for _, k := range j.keys {
		m.keyHolders[k] += delta
		if delta > 0 && m.rateOf[k] != (Rate{}) {
			m.rateStarts[k] = append(m.rateStarts[k], m.now())
		}
	}
	if j.spec.Group != "" {
		m.groupHolders[j.spec.Group] += delta
	}
	m.modeHolders[j.spec.Mode] += delta
}

// finish ends a job for good and tells its dependants
// (docs/design.md, "Workflows"): on failure they are cancelled unless they run
// after failures.
func (m *simModel) finish(j *simJob, ok bool) {
	j.state = simEnded
	if ok {
		j.state = simSucceeded
	}
	m.finished = append(m.finished, j)
	for _, d := range j.dependants {
		if d.state != simWaiting {
			continue
		}
		if !ok && !d.spec.RunAfterFailure {
			m.expectEvent(simEvent{kind: EventCancelled, job: d.spec.ID})
			m.finish(d, false)
			continue
		}
		d.pending--
		if d.pending == 0 {
			m.makeReady(d)
		}
	}
}

// retryOrFail decides the fate of an attempt that did not succeed.
func (m *simModel) retryOrFail(j *simJob) (bool, time.Time) {
	p := m.policy(j)
	if j.attempt >= max(1, p.MaxAttempts) {
		m.finish(j, false)
		return false, time.Time{}
	}
	wait := simBackoff(p, j.attempt)
	if wait <= 0 {
		m.makeReady(j)
		return true, m.now()
	}
	j.state, j.wakeAt = simDelayed, m.now().Add(wait)
	return true, j.wakeAt
}

// dropWorker predicts what removing a worker does to its jobs.
func (m *simModel) dropWorker(w *simWorker) {
	for _, j := range m.liveJobs() {
		if j.state != simRunning || j.worker != w {
			continue
		}
		ev := simEvent{job: j.spec.ID, worker: w.spec.ID, attempt: j.attempt}
		m.release(j)
		if j.interactive {
			ev.kind = EventHalted
			m.finish(j, false)
		} else {
			again, at := m.retryOrFail(j)
			ev.kind, ev.at = EventFailed, at
			if again {
				ev.kind = EventRetrying
			}
		}
		m.expectEvent(ev)
	}
	delete(m.workers, w.spec.ID)
}

// tick predicts Tick: lapsed leases, then retries whose backoff ended.
func (m *simModel) tick() {
	now := m.now()
	var lapsed []*simWorker
	for _, w := range m.workers {
		if !w.deadline.IsZero() && !w.deadline.After(now) {
			lapsed = append(lapsed, w)
		}
	}
	slices.SortFunc(lapsed, func(a, b *simWorker) int { return strings.Compare(a.spec.ID, b.spec.ID) })
	for _, w := range lapsed {
		m.expectEvent(simEvent{kind: EventLeaseExpired, worker: w.spec.ID})
		m.dropWorker(w)
	}
	for _, j := range m.liveJobs() {
		if j.state == simDelayed && !j.wakeAt.After(now) {
			m.makeReady(j)
		}
	}
}

func (m *simModel) renew(w *simWorker) {
	w.deadline = time.Time{}
	if w.spec.LeaseTTL > 0 {
		w.deadline = m.now().Add(w.spec.LeaseTTL)
	}
}

func (m *simModel) addWorker(spec WorkerSpec) {
	w := m.workers[spec.ID]
	if w == nil {
		w = &simWorker{}
		m.workers[spec.ID] = w
	}
	w.spec = spec
	m.renew(w)
}

// cancel predicts Cancel of a live job.
func (m *simModel) cancel(j *simJob) {
	if j.state == simRunning {
		m.expectEvent(simEvent{kind: EventStopped, job: j.spec.ID, worker: j.worker.spec.ID, attempt: j.attempt})
		m.release(j)
	}
	m.finish(j, false)
}

// removeQueue predicts RemoveQueue of an idle queue: its jobs are
// cancelled in id order, each announced.
func (m *simModel) removeQueue(name string) {
	var victims []*simJob
	for _, j := range m.liveJobs() {
		if j.spec.Queue == name {
			victims = append(victims, j)
		}
	}
	slices.SortFunc(victims, func(a, b *simJob) int { return strings.Compare(a.spec.ID, b.spec.ID) })
	for _, j := range victims {
		if j.state.live() {
			m.expectEvent(simEvent{kind: EventCancelled, job: j.spec.ID})
			m.finish(j, false)
		}
	}
	delete(m.queues, name)
}

// complete predicts the acknowledgement of Complete.
func (m *simModel) complete(id string, attempt int, outcome Outcome) Ack {
	j := m.jobs[id]
	if j == nil || j.state != simRunning || j.attempt != attempt {
		return Ack{Ignored: true}
	}
	m.release(j)
	if outcome == Succeeded || j.interactive {
		m.finish(j, outcome == Succeeded)
		return Ack{}
	}
	again, at := m.retryOrFail(j)
	return Ack{Retrying: again, RetryAt: at}
}

// submitProblems lists every reason the documented rules give to refuse a
// submission; the core must refuse it with one of them, or accept it when
// there is none.
func (m *simModel) submitProblems(specs []JobSpec, edges []Edge) []error {
	var errs []error
	isNew := map[string]bool{}
	for _, sp := range specs {
		if isNew[sp.ID] || m.isLive(sp.ID) {
			errs = append(errs, ErrDuplicateJob)
		}
		isNew[sp.ID] = true
	}
	known := func(id string) bool { return isNew[id] || m.isLive(id) }
	for _, sp := range specs {
		errs = append(errs, m.specProblems(sp, known)...)
	}
	for _, e := range edges {
		switch {
		case !isNew[e.To]:
			errs = append(errs, ErrInvalidJob, ErrUnknownJob)
		case e.From == e.To:
			errs = append(errs, ErrCycle)
		case !known(e.From):
			errs = append(errs, ErrUnknownDependency)
		}
	}
	if len(errs) == 0 && simHasCycle(specs, edges) {
		errs = append(errs, ErrCycle)
	}
	return errs
}

func (m *simModel) specProblems(sp JobSpec, known func(string) bool) []error {
	var errs []error
	if _, ok := m.queues[sp.Queue]; !ok {
		errs = append(errs, ErrUnknownQueue)
	}
	if !sp.Default && (sp.Tier < 0 || sp.Tier >= len(m.tiers)) {
		errs = append(errs, ErrInvalidJob)
	}
	for _, d := range sp.After {
		if d == sp.ID {
			errs = append(errs, ErrCycle)
		} else if !known(d) {
			errs = append(errs, ErrUnknownDependency)
		}
	}
	return errs
}

// simHasCycle looks for a dependency cycle among new jobs by repeatedly
// removing jobs with no new upstream job left.
func simHasCycle(specs []JobSpec, edges []Edge) bool {
	ups := simUpstream(specs, edges)
	remaining := map[string]bool{}
	for _, sp := range specs {
		remaining[sp.ID] = true
	}
	for progress := true; progress; {
		progress = false
		for _, sp := range specs {
			if remaining[sp.ID] && !slices.ContainsFunc(ups[sp.ID], func(u string) bool { return remaining[u] }) {
				delete(remaining, sp.ID)
				progress = true
			}
		}
	}
	return len(remaining) > 0
}

// simUpstream merges each new job's After list with the edges, once each.
func simUpstream(specs []JobSpec, edges []Edge) map[string][]string {
	ups := map[string][]string{}
	for _, sp := range specs {
		ups[sp.ID] = append(ups[sp.ID], sp.After...)
	}
	for _, e := range edges {
		ups[e.To] = append(ups[e.To], e.From)
	}
	for id, u := range ups {
		slices.Sort(u)
		ups[id] = slices.Compact(u)
	}
	return ups
}

// submit records an accepted submission.
func (m *simModel) submit(specs []JobSpec, edges []Edge) {
	ups := simUpstream(specs, edges)
	jobs := make([]*simJob, len(specs))
	for i, sp := range specs {
		keys := slices.Clone(sp.Keys)
		slices.Sort(keys)
		j := &simJob{spec: sp, keys: slices.Compact(keys), deps: ups[sp.ID], state: simWaiting}
		m.jobs[sp.ID] = j
		m.live = append(m.live, j)
		jobs[i] = j
	}
	for _, j := range jobs {
		for _, u := range j.deps {
			up := m.jobs[u]
			up.dependants = append(up.dependants, j)
			j.pending++
		}
	}
	for i, j := range jobs {
		if j.pending == 0 {
			m.sub = i + 1
			m.makeReady(j)
		}
	}
	m.sub = 0
}

// freePushWorker reports whether some push worker with a free slot serves
// the queue (StartInteractive's condition).
func (m *simModel) freePushWorker(queue string) bool {
	for _, w := range m.workers {
		if w.spec.Push && w.free() > 0 && simServes(w, m.queues[queue]) {
			return true
		}
	}
	return false
}

// simServes says whether a worker offers every capability a queue requires.
func simServes(w *simWorker, q QueueSpec) bool {
	for _, c := range q.Requires {
		if !slices.Contains(w.spec.Capabilities, c) {
			return false
		}
	}
	return true
}

// gateBlock says why a job may not start now for the rules that depend on
// what runs elsewhere (keys, groups, read/write), or nil.
func (m *simModel) gateBlock(j *simJob) error {
	for _, k := range j.keys {
		if n, l := m.keyHolders[k], m.keyLimit(k); n >= l {
			return fmt.Errorf("key %s already has %d running holders, limit %d", k, n, l)
		}
		if err := m.rateBlock(k); err != nil {
			return err
		}
	}
	if g := j.spec.Group; g != "" && m.groupHolders[g] > 0 {
		return fmt.Errorf("group %s already runs a job", g)
	}
	switch j.spec.Mode {
	case ModeRead:
		if n := m.modeHolders[ModeWrite]; n > 0 {
			return fmt.Errorf("read starts while %d writes run", n)
		}
	case ModeWrite:
		if n := m.modeHolders[ModeRead]; n > 0 {
			return fmt.Errorf("write starts while %d reads run", n)
		}
	}
	return nil
}

// tierOpen says whether every tier limit a queued job needs has room: a
// fixed job in tier t needs tiers 1..t; a default task is queued as fast.
func (m *simModel) tierOpen(j *simJob, limits []int) bool {
	t := j.spec.Tier
	if j.spec.Default {
		t = 0
	}
	for k := 1; k <= t; k++ {
		if m.counted(k) >= limits[k] {
			return false
		}
	}
	return true
}

func (m *simModel) admissible(j *simJob, limits []int) bool {
	return m.gateBlock(j) == nil && m.tierOpen(j, limits)
}

// queued lists the jobs queued in a queue.
func (m *simModel) queued(queue string) []*simJob {
	var out []*simJob
	for _, j := range m.liveJobs() {
		if j.state == simQueued && j.spec.Queue == queue {
			out = append(out, j)
		}
	}
	return out
}

// settledQueued lists the jobs queued in a queue before the current
// operation, and j. Dispatch makes jobs ready only when a halt lets their
// dependencies finish, possibly after the start being judged, so such jobs
// may be overtaken and may wait for the next Dispatch.
func (m *simModel) settledQueued(queue string, j *simJob) []*simJob {
	out := m.queued(queue)
	return slices.DeleteFunc(out, func(o *simJob) bool { return o.rank.op == m.op && o != j })
}

// simFirsts returns the jobs of a strict queue's js that no other job of js
// must precede.
func simFirsts(js []*simJob) []*simJob {
	var out []*simJob
	for _, j := range js {
		if !slices.ContainsFunc(js, func(o *simJob) bool { return o.before(j, true) }) {
			out = append(out, j)
		}
	}
	return out
}

// hasWork says whether a queue surely has a job that may start now: any
// admissible job, or for a strict queue a head that is surely admissible
// (every candidate for the head is).
func (m *simModel) hasWork(name string, limits []int) bool {
	q, ok := m.queues[name]
	if !ok || q.Paused {
		return false
	}
	queued := m.settledQueued(name, nil)
	if q.Order == OrderStrict {
		heads := simFirsts(queued)
		return len(heads) > 0 && !slices.ContainsFunc(heads, func(j *simJob) bool { return !m.admissible(j, limits) })
	}
	return slices.ContainsFunc(queued, func(j *simJob) bool { return m.admissible(j, limits) })
}

// sortedQueues lists queue names in order, for determinism.
func (m *simModel) sortedQueues() []string {
	names := make([]string, 0, len(m.queues))
	for n := range m.queues {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (m *simModel) sortedWorkers() []*simWorker {
	ws := make([]*simWorker, 0, len(m.workers))
	for _, w := range m.workers {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *simWorker) int { return strings.Compare(a.spec.ID, b.spec.ID) })
	return ws
}

// matchEvents compares the events the core emitted with the prediction,
// as multisets.
func (m *simModel) matchEvents(got []simEvent) error {
	render := func(es []simEvent) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.String()
		}
		slices.Sort(out)
		return out
	}
	g, w := render(got), render(m.expect)
	if !slices.Equal(g, w) {
		return fmt.Errorf("events %q, want %q", g, w)
	}
	return nil
}

// simWantErr compares an error with the predicted problems.
func simWantErr(what string, err error, problems []error) error {
	if len(problems) == 0 {
		if err != nil {
			return fmt.Errorf("%s: unexpected error %v", what, err)
		}
		return nil
	}
	if err == nil {
		return fmt.Errorf("%s: accepted, want one of %v", what, problems)
	}
	for _, p := range problems {
		if errors.Is(err, p) {
			return nil
		}
	}
	return fmt.Errorf("%s: error %v, want one of %v", what, err, problems)
}
