package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// simRun drives a Scheduler and its model through operations, checking after
// each one every invariant of the scheduling rules both with the core's own
// checker and from the outside.
type simRun struct {
	s           *Scheduler
	clk         *clock
	m           *simModel
	tiers       []Tier
	ops         []simOp
	prevCounted []int
}

func newSimRun(tiers []Tier, seed uint64) (*simRun, error) {
	clk := newClock()
	s, err := New(Config{Tiers: tiers, Now: clk.Now, Rand: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))})
	if err != nil {
		return nil, err
	}
	return &simRun{s: s, clk: clk, m: newSimModel(clk.Now, tiers), tiers: tiers, prevCounted: make([]int, len(tiers))}, nil
}

// simFailure reports a violation with everything needed to replay it.
type simFailure struct {
	name  string
	tiers []Tier
	ops   []simOp
	err   error
}

func (f *simFailure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: violation at operation #%d (%s): %v\n", f.name, len(f.ops), f.ops[len(f.ops)-1], f.err)
	fmt.Fprintf(&b, "replay: %s, then:\n", simTiersString(f.tiers))
	for i, op := range f.ops {
		fmt.Fprintf(&b, "  #%d %s\n", i+1, op)
	}
	return b.String()
}

func (r *simRun) fail(name string, err error) error {
	if len(r.ops) == 0 {
		return fmt.Errorf("%s: %w", name, err)
	}
	return &simFailure{name: name, tiers: r.tiers, ops: r.ops, err: err}
}

// do applies one operation and checks everything after it.
func (r *simRun) do(op simOp) error {
	r.ops = append(r.ops, op)
	r.m.beginOp()
	starts, err := r.apply(op)
	if err != nil {
		return err
	}
	return r.verify(starts)
}

func (r *simRun) apply(op simOp) ([]Assignment, error) {
	switch op.kind {
	case simSubmit, simSubmitWorkflow:
		return nil, r.submit(op)
	case simInteractive:
		return r.interactive(op.jobs[0])
	case simDispatch:
		starts := r.s.Dispatch()
		return starts, r.settle(r.s.Events(), starts, simHow{kind: simDispatch})
	case simPull:
		return r.pull(op.id, op.n)
	case simComplete:
		return nil, r.complete(op)
	}
	if err := r.configure(op); err != nil {
		return nil, err
	}
	return nil, r.settle(r.s.Events(), nil, simHow{kind: op.kind})
}

// configure applies the operations that start nothing and emit only
// predictable events.
func (r *simRun) configure(op simOp) error {
	switch op.kind {
	case simDefineQueue:
		if err := simWantErr("DefineQueue", r.s.DefineQueue(op.queue), nil); err != nil {
			return err
		}
		r.m.queues[op.queue.Name] = op.queue
	case simSetKeyLimit:
		if err := simWantErr("SetKeyLimit", r.s.SetKeyLimit(op.id, op.n), nil); err != nil {
			return err
		}
		r.m.setKeyLimit(op.id, op.n)
	case simSetKeyRate:
		var problems []error
		if op.rate != (Rate{}) && op.rate.Burst < 1 {
			problems = []error{ErrInvalidRate}
		}
		if err := simWantErr("SetKeyRate", r.s.SetKeyRate(op.id, op.rate), problems); err != nil || problems != nil {
			return err
		}
		r.m.setKeyRate(op.id, op.rate)
	case simSetTierLimits:
		return r.setTierLimits(op.limits)
	case simAddWorker:
		if err := simWantErr("AddWorker", r.s.AddWorker(op.worker), nil); err != nil {
			return err
		}
		r.m.addWorker(op.worker)
	case simAdvance:
		r.clk.advance(op.dt)
	case simTick:
		r.m.tick()
		r.s.Tick()
	case simEstimates:
		return r.estimates(op.id, op.n)
	default:
		return r.withdraw(op)
	}
	return nil
}

// withdraw applies the operations that take something away.
func (r *simRun) withdraw(op simOp) error {
	m := r.m
	var problems []error
	var err error
	switch op.kind {
	case simRemoveWorker, simRenew:
		w := m.workers[op.id]
		if w == nil {
			problems = []error{ErrUnknownWorker}
		}
		if op.kind == simRenew {
			err = r.s.Renew(op.id)
		} else {
			err = r.s.RemoveWorker(op.id)
		}
		if w != nil && op.kind == simRenew {
			m.renew(w)
		} else if w != nil {
			m.dropWorker(w)
		}
	case simCancel:
		if !m.isLive(op.id) {
			problems = []error{ErrUnknownJob}
		} else {
			m.cancel(m.jobs[op.id])
		}
		err = r.s.Cancel(op.id)
	case simRemoveQueue:
		problems = r.removeQueueProblems(op.id)
		if problems == nil {
			m.removeQueue(op.id)
		}
		err = r.s.RemoveQueue(op.id)
	}
	return simWantErr(op.String(), err, problems)
}

func (r *simRun) removeQueueProblems(name string) []error {
	if _, ok := r.m.queues[name]; !ok {
		return []error{ErrUnknownQueue}
	}
	for _, j := range r.m.liveJobs() {
		if j.state == simRunning && j.spec.Queue == name {
			return []error{ErrQueueBusy}
		}
	}
	return nil
}

func (r *simRun) setTierLimits(limits []int) error {
	var problems []error
	if len(limits) != len(r.m.tiers) {
		problems = append(problems, ErrInvalidTiers)
	}
	for k := 1; k < len(limits) && problems == nil; k++ {
		if limits[k] < 1 || k > 1 && limits[k] > limits[k-1] {
			problems = append(problems, ErrInvalidTiers)
		}
	}
	if err := simWantErr("SetTierLimits", r.s.SetTierLimits(limits), problems); err != nil || problems != nil {
		return err
	}
	for k := 1; k < len(limits); k++ {
		r.m.tiers[k].Limit, r.m.tiers[k].Share = limits[k], 0
	}
	return nil
}

func (r *simRun) submit(op simOp) error {
	problems := r.m.submitProblems(op.jobs, op.edges)
	var err error
	if op.kind == simSubmit {
		err = r.s.Submit(op.jobs[0])
	} else {
		err = r.s.SubmitWorkflow(op.jobs, op.edges)
	}
	if err := simWantErr(op.String(), err, problems); err != nil {
		return err
	}
	if problems == nil {
		r.m.submit(op.jobs, op.edges)
	}
	return r.settle(r.s.Events(), nil, simHow{kind: op.kind})
}

func (r *simRun) complete(op simOp) error {
	want := r.m.complete(op.id, op.n, op.outcome)
	id := op.id
	if len(r.ops)%2 == 0 {
		id = strings.Clone(id) // as a driver decoding reports from the wire
	}
	got := r.s.Complete(id, op.n, op.outcome)
	if got != want {
		return fmt.Errorf("ack %+v, want %+v", got, want)
	}
	return r.settle(r.s.Events(), nil, simHow{kind: simComplete})
}

// interactive starts an interactive task: it runs at once on a free push
// worker serving its queue, or is denied and one default task is
// downgraded by one tier. A paused queue denies it without a downgrade.
func (r *simRun) interactive(spec JobSpec) ([]Assignment, error) {
	m := r.m
	var problems []error
	noSlot := false
	switch {
	case m.isLive(spec.ID):
		problems = []error{ErrDuplicateJob}
	case m.queues[spec.Queue].Name == "":
		problems = []error{ErrUnknownQueue}
	case m.queues[spec.Queue].Paused:
		problems = []error{ErrDenied}
	case !m.freePushWorker(spec.Queue):
		problems, noSlot = []error{ErrDenied}, true
	}
	a, err := r.s.StartInteractive(spec)
	if err := simWantErr("StartInteractive", err, problems); err != nil {
		return nil, err
	}
	how := simHow{kind: simInteractive, denied: noSlot}
	if problems != nil {
		return nil, r.settle(r.s.Events(), nil, how)
	}
	if err := r.startInteractive(spec, a); err != nil {
		return nil, err
	}
	return []Assignment{a}, r.settle(r.s.Events(), nil, how)
}

func (r *simRun) startInteractive(spec JobSpec, a Assignment) error {
	m := r.m
	w := m.workers[a.WorkerID]
	switch {
	case a.JobID != spec.ID || a.Queue != spec.Queue || !a.Interactive || a.Default || a.Tier != 0 || a.Duration != 0 || a.Attempt != 1:
		return fmt.Errorf("interactive assignment %+v", a)
	case w == nil || !w.spec.Push || w.free() <= 0 || !simServes(w, m.queues[spec.Queue]):
		return fmt.Errorf("interactive task %s given to %s, not a free push worker serving %s", spec.ID, a.WorkerID, spec.Queue)
	}
	j := &simJob{spec: spec, interactive: true}
	m.jobs[spec.ID] = j
	m.live = append(m.live, j)
	m.start(j, w, 0)
	return nil
}

func (r *simRun) pull(id string, n int) ([]Assignment, error) {
	w := r.m.workers[id]
	var problems []error
	if w == nil {
		problems = append(problems, ErrUnknownWorker)
	}
	if n < 0 {
		problems = append(problems, ErrInvalidBatch)
	}
	starts, err := r.s.Pull(id, n)
	if err := simWantErr("Pull", err, problems); err != nil || problems != nil {
		return nil, err
	}
	r.m.renew(w)
	return starts, r.settle(r.s.Events(), starts, simHow{kind: simPull, worker: w, max: n, free: w.free()})
}

// estimates checks that a queue's estimates list its queued jobs in queue
// order.
func (r *simRun) estimates(queue string, n int) error {
	var problems []error
	if _, ok := r.m.queues[queue]; !ok {
		problems = append(problems, ErrUnknownQueue)
	}
	if n < 0 {
		problems = append(problems, ErrInvalidBatch)
	}
	es, err := r.s.Estimates(queue, n)
	if err := simWantErr("Estimates", err, problems); err != nil || problems != nil {
		return err
	}
	if want := min(n, len(r.m.queued(queue))); len(es) != want {
		return fmt.Errorf("%d estimates, want %d", len(es), want)
	}
	var prev *simJob
	for i, e := range es {
		j := r.m.jobs[e.JobID]
		switch {
		case j == nil || j.state != simQueued || j.spec.Queue != queue:
			return fmt.Errorf("estimate for %s, which is not queued in %s", e.JobID, queue)
		case e.Position != i || e.Wait < 0:
			return fmt.Errorf("estimate %d: %+v", i, e)
		case prev != nil && j.before(prev, r.m.queues[queue].Order == OrderStrict):
			return fmt.Errorf("estimates list %s after %s, which it must follow", j.spec.ID, prev.spec.ID)
		}
		prev = j
	}
	return nil
}

// simHow says which operation emitted events and started jobs.
type simHow struct {
	kind   simOpKind
	worker *simWorker // Pull: the worker that asked
	max    int        // Pull: how many it asked for
	free   int        // Pull: its free slots when it asked
	denied bool       // StartInteractive: the task was denied
}

// settle checks an operation's events and assignments. Halts and
// downgrades that Dispatch and Pull choose at random are checked for
// legality; every other event must be exactly the model's prediction.
func (r *simRun) settle(evs []Event, starts []Assignment, how simHow) error {
	var downgrades []Event
	var rest []simEvent
	for _, e := range evs {
		switch {
		case e.Kind == EventDowngraded:
			downgrades = append(downgrades, e)
		case e.Kind == EventHalted && how.kind == simDispatch:
			if err := r.m.randomHalt(e); err != nil {
				return err
			}
		default:
			rest = append(rest, simEventOf(e))
		}
	}
	if err := r.checkStarts(starts, how, len(downgrades) == 0); err != nil {
		return err
	}
	if err := r.checkDowngrades(downgrades, how); err != nil {
		return err
	}
	return r.m.matchEvents(rest)
}

// randomHalt checks and records a halt Dispatch chose: the fast limit was
// reached, so a running interactive task gave its slot.
func (m *simModel) randomHalt(e Event) error {
	j := m.jobs[e.JobID]
	if j == nil || !j.interactive || j.state != simRunning || j.attempt != e.Attempt || j.worker.spec.ID != e.WorkerID {
		return fmt.Errorf("halt of %s, which is not a running interactive task on %s", e.JobID, e.WorkerID)
	}
	m.release(j)
	m.finish(j, false)
	return nil
}

func (r *simRun) checkDowngrades(evs []Event, how simHow) error {
	switch how.kind {
	case simDispatch, simPull:
	case simInteractive:
		return r.checkDenialDowngrade(evs, how.denied)
	default:
		if len(evs) > 0 {
			return fmt.Errorf("%s downgraded %s", how.kind.name(), evs[0].JobID)
		}
	}
	for _, e := range evs {
		if err := r.m.downgrade(e); err != nil {
			return err
		}
	}
	return nil
}

// checkDenialDowngrade: a denied interactive task downgrades one default
// task by one tier, a random one from the slowest tier that has one.
func (r *simRun) checkDenialDowngrade(evs []Event, denied bool) error {
	slowest := 0
	for _, j := range r.m.liveJobs() {
		if j.state == simRunning && j.spec.Default {
			slowest = max(slowest, j.tier)
		}
	}
	want := 0
	if denied && slowest > 0 {
		want = 1
	}
	if len(evs) != want {
		return fmt.Errorf("%d downgrades after StartInteractive (denied %v, slowest default in tier %d), want %d", len(evs), denied, slowest, want)
	}
	for _, e := range evs {
		if j := r.m.jobs[e.JobID]; j == nil || j.tier != slowest || e.Tier != slowest-1 {
			return fmt.Errorf("denial downgraded %s to tier %d; want a default of tier %d moved to %d", e.JobID, e.Tier, slowest, slowest-1)
		}
		if err := r.m.downgrade(e); err != nil {
			return err
		}
	}
	return nil
}

// downgrade checks and records a downgrade: a running default task moves
// to a faster tier, told to stop at once when it already ran longer.
func (m *simModel) downgrade(e Event) error {
	j := m.jobs[e.JobID]
	if j == nil || j.state != simRunning || !j.spec.Default || j.attempt != e.Attempt || j.worker.spec.ID != e.WorkerID {
		return fmt.Errorf("downgrade of %s, which is not a running default task on %s", e.JobID, e.WorkerID)
	}
	if e.Tier < 0 || e.Tier >= j.tier {
		return fmt.Errorf("downgrade of %s from tier %d to %d", e.JobID, j.tier, e.Tier)
	}
	d := m.tiers[e.Tier].Duration
	if e.Duration != d || e.StopNow != (m.now().Sub(j.started) >= d) {
		return fmt.Errorf("downgrade of %s started %s ago to %s: duration %s stop-now %v", e.JobID, m.now().Sub(j.started), d, e.Duration, e.StopNow)
	}
	m.tierRunning[j.tier]--
	m.tierRunning[e.Tier]++
	j.tier = e.Tier
	return nil
}

func (k simOpKind) name() string {
	return strings.Fields(simOp{kind: k, jobs: []JobSpec{{}}}.String())[0]
}

// verify checks the core's state after an operation: its own invariant
// checker, then the snapshot and each job against the model, then the
// tier limits.
func (r *simRun) verify(starts []Assignment) error {
	if err := r.s.CheckInvariants(); err != nil {
		return fmt.Errorf("CheckInvariants: %w", err)
	}
	if err := r.checkJobs(); err != nil {
		return err
	}
	if limits := r.m.tierLimits(); !slices.Equal(r.s.TierLimits(), limits) {
		return fmt.Errorf("tier limits %v, want %v", r.s.TierLimits(), limits)
	}
	if len(r.ops)%simSnapshotEvery == 0 {
		if err := r.checkSnapshot(r.s.Snapshot()); err != nil {
			return err
		}
	}
	return r.checkTierLimits(starts)
}

// simSnapshotEvery spaces the snapshot comparisons, which cost as much as
// the rest of the checks together; the drain ends with one.
const simSnapshotEvery = 4

// checkJobs compares each live job's state with the core's, and checks
// that jobs that finished are forgotten.
func (r *simRun) checkJobs() error {
	for _, j := range r.m.liveJobs() {
		cj := r.s.jobs.get(j.spec.ID)
		if cj == nil {
			return fmt.Errorf("job %s is %s, but the core forgot it", j.spec.ID, j.state)
		}
		if cj.state != j.state.core() {
			return fmt.Errorf("job %s is %s, but the core has state %d", j.spec.ID, j.state, cj.state)
		}
		if j.state != simRunning {
			continue
		}
		if run := r.s.run(cj); int(cj.attempt) != j.attempt || run.worker.id != j.worker.spec.ID || int(run.tier) != j.tier {
			return fmt.Errorf("job %s runs attempt %d on %s in tier %d; core: attempt %d on %s in tier %d",
				j.spec.ID, j.attempt, j.worker.spec.ID, j.tier, cj.attempt, run.worker.id, run.tier)
		}
	}
	for _, j := range r.m.finished {
		if r.s.jobs.get(j.spec.ID) != nil {
			return fmt.Errorf("job %s is %s, but the core still holds it", j.spec.ID, j.state)
		}
	}
	return nil
}

func (r *simRun) checkSnapshot(snap Snapshot) error {
	m := r.m
	limits := m.tierLimits()
	for k, tu := range snap.Tiers {
		if tu.Running != m.tierRunning[k] || tu.Counted != m.counted(k) || tu.Limit != limits[k] {
			return fmt.Errorf("snapshot tier %d: running %d counted %d limit %d, want %d %d %d",
				k, tu.Running, tu.Counted, tu.Limit, m.tierRunning[k], m.counted(k), limits[k])
		}
	}
	if err := r.checkSnapshotWorkers(snap.Workers); err != nil {
		return err
	}
	if err := r.checkSnapshotQueues(snap); err != nil {
		return err
	}
	return r.checkSnapshotGates(snap)
}

func (r *simRun) checkSnapshotWorkers(got []WorkerUsage) error {
	var want []WorkerUsage
	for _, w := range r.m.sortedWorkers() {
		want = append(want, WorkerUsage{ID: w.spec.ID, Slots: w.spec.Slots, Running: w.running, Push: w.spec.Push})
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("snapshot workers %+v, want %+v", got, want)
	}
	return nil
}

func (r *simRun) checkSnapshotQueues(snap Snapshot) error {
	want := map[string]*QueueUsage{}
	for name := range r.m.queues {
		want[name] = &QueueUsage{}
	}
	interactive := 0
	for _, j := range r.m.liveJobs() {
		u := want[j.spec.Queue]
		switch j.state {
		case simWaiting:
			u.Waiting++
		case simDelayed:
			u.Delayed++
		case simQueued:
			u.Queued++
		case simRunning:
			u.Running++
			if j.interactive {
				interactive++
			}
		}
	}
	if len(snap.Queues) != len(want) || snap.Interactive != interactive {
		return fmt.Errorf("snapshot has %d queues and %d interactive tasks, want %d and %d", len(snap.Queues), snap.Interactive, len(want), interactive)
	}
	for _, q := range snap.Queues {
		w := want[q.Name]
		if w == nil || q.Queued != w.Queued || q.Waiting != w.Waiting || q.Delayed != w.Delayed || q.Running != w.Running {
			return fmt.Errorf("snapshot queue %s: %d/%d/%d/%d queued/waiting/delayed/running, want %+v", q.Name, q.Queued, q.Waiting, q.Delayed, q.Running, w)
		}
	}
	return nil
}

// checkSnapshotGates compares running holders of keys, groups and modes.
func (r *simRun) checkSnapshotGates(snap Snapshot) error {
	m := r.m
	if snap.Reads != m.modeHolders[ModeRead] || snap.Writes != m.modeHolders[ModeWrite] {
		return fmt.Errorf("snapshot: %d reads %d writes, want %d %d", snap.Reads, snap.Writes, m.modeHolders[ModeRead], m.modeHolders[ModeWrite])
	}
	check := func(what string, got []KeyUsage, want map[string]int, limit func(string) int) error {
		listed, held := 0, 0
		for _, u := range got {
			if u.Running != want[u.Key] || u.Limit != limit(u.Key) {
				return fmt.Errorf("snapshot %s %s: %d running, limit %d; want %d, limit %d", what, u.Key, u.Running, u.Limit, want[u.Key], limit(u.Key))
			}
			if u.Running > 0 {
				listed++
			}
		}
		for _, n := range want {
			if n > 0 {
				held++
			}
		}
		if listed != held {
			return fmt.Errorf("snapshot %s %+v misses held ones of %v", what, got, want)
		}
		return nil
	}
	keyLimit := func(k string) int {
		if l := m.keyLimit(k); l != math.MaxInt {
			return l
		}
		return 0
	}
	if err := check("key", snap.Keys, m.keyHolders, keyLimit); err != nil {
		return err
	}
	return check("group", snap.Groups, m.groupHolders, func(string) int { return 1 })
}

// checkTierLimits: a tier's count never exceeds its limit because of a
// start. Only starts raise counts, and a job starts in tier t only while
// every tier up to t has room, so after an operation a count above its
// limit is legal only when the limit fell under load and nothing started
// against it since. Tier 0's limit is every slot: it holds worker by worker
// (checkPlace), so a worker whose slots fell under load does not keep the
// others from their free slots.
func (r *simRun) checkTierLimits(starts []Assignment) error {
	m := r.m
	limits := m.tierLimits()
	for k := range limits {
		c := m.counted(k)
		if len(starts) == 0 && c > r.prevCounted[k] {
			return fmt.Errorf("tier %d: count rose from %d to %d with no start", k, r.prevCounted[k], c)
		}
		if i := slices.IndexFunc(starts, func(a Assignment) bool { return a.Tier >= k }); k > 0 && c > limits[k] && i >= 0 {
			return fmt.Errorf("tier %d: %d running over limit %d after starting %s in tier %d", k, c, limits[k], starts[i].JobID, starts[i].Tier)
		}
		r.prevCounted[k] = c
	}
	return nil
}

// drain unpauses every queue, adds a worker that serves them all, then
// completes whatever runs and dispatches until nothing is left: every
// counter must be back at zero.
func (r *simRun) drain() error {
	for _, name := range r.m.sortedQueues() {
		if q := r.m.queues[name]; q.Paused {
			q.Paused = false
			if err := r.do(simOp{kind: simDefineQueue, queue: q}); err != nil {
				return err
			}
		}
	}
	if err := r.do(simOp{kind: simAddWorker, worker: WorkerSpec{ID: "wd", Slots: 8, Push: true, Capabilities: simCapabilities}}); err != nil {
		return err
	}
	for round := 0; len(r.m.liveJobs()) > 0; round++ {
		if round == simDrainRounds {
			return fmt.Errorf("drain: %d jobs left after %d rounds", len(r.m.liveJobs()), round)
		}
		if err := r.drainRound(); err != nil {
			return err
		}
	}
	if err := r.checkSnapshot(r.s.Snapshot()); err != nil {
		return err
	}
	if err := r.s.Idle(); err != nil {
		return fmt.Errorf("drained, but the core is not idle: %w", err)
	}
	return nil
}

const simDrainRounds = 10_000

func (r *simRun) drainRound() error {
	var ops []simOp
	for _, j := range r.m.liveJobs() {
		if j.state == simRunning {
			ops = append(ops, simOp{kind: simComplete, id: j.spec.ID, n: j.attempt, outcome: Succeeded})
		}
	}
	ops = append(ops, simOp{kind: simAdvance, dt: time.Minute}, simOp{kind: simTick}, simOp{kind: simDispatch})
	for _, op := range ops {
		if err := r.do(op); err != nil {
			return err
		}
	}
	for _, w := range r.m.sortedWorkers() {
		if !w.spec.Push {
			if err := r.do(simOp{kind: simPull, id: w.spec.ID, n: 4}); err != nil {
				return err
			}
		}
	}
	return nil
}
