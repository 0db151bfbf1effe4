package sched

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// simSource is where the generator draws its choices from: a seeded PRNG
// for the simulation, the fuzzer's bytes for FuzzEvents.
type simSource interface {
	// intn returns a number in [0, n); n ≥ 1.
	intn(n int) int
	// done says that the source has nothing left to give.
	done() bool
}

type simRandSource struct{ r *rand.Rand }

func (s simRandSource) intn(n int) int { return s.r.IntN(n) }
func (simRandSource) done() bool       { return false }

// simByteSource reads choices from bytes, one byte each (two when n > 256);
// past the end every choice is 0.
type simByteSource struct {
	data []byte
	pos  int
}

func (s *simByteSource) byte() int {
	if s.pos >= len(s.data) {
		return 0
	}
	s.pos++
	return int(s.data[s.pos-1])
}

func (s *simByteSource) intn(n int) int {
	v := s.byte()
	if n > 256 {
		v = v<<8 | s.byte()
	}
	return v % n
}

func (s *simByteSource) done() bool { return s.pos >= len(s.data) }

// The small worlds the generator draws from, so that jobs collide on
// queues, keys, groups and workers.
var (
	simQueueNames   = []string{"q0", "q1", "q2", "q3"}
	simWorkerIDs    = []string{"w0", "w1", "w2", "w3", "w4", "w5"}
	simCapabilities = []string{"gpu", "net"}
	simKeys         = []string{"k0", "k1", "k2", "net:a", "net:b"}
	simKeyPatterns  = []string{"k0", "k1", "k2", "k*", "net:*", "net:a*", "net:a"}
	simGroups       = []string{"g0", "g1", "g2"}
	simSteps        = []time.Duration{100 * time.Millisecond, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second, 40 * time.Second}
)

// simWeights is the mix of operations.
var simWeights = [...]int{
	simDefineQueue: 4, simSetKeyLimit: 3, simSetTierLimits: 2, simSubmit: 20, simSubmitWorkflow: 6,
	simInteractive: 4, simAddWorker: 5, simRemoveWorker: 2, simDispatch: 14, simPull: 10,
	simComplete: 18, simCancel: 3, simRenew: 3, simAdvance: 5, simTick: 5, simRemoveQueue: 1, simEstimates: 2,
	simSetKeyRate: 3,
}

// simGen turns a source into operations, choosing arguments from the
// model's state so that most operations do something.
type simGen struct {
	src    simSource
	m      *simModel
	nextID int
	total  int
	last   simOp // the last completion, to report it again
}

func newSimGen(src simSource) *simGen {
	g := &simGen{src: src}
	for _, w := range simWeights {
		g.total += w
	}
	return g
}

func (g *simGen) chance(percent int) bool { return g.src.intn(100) < percent }

func simPick[T any](g *simGen, xs []T) T { return xs[g.src.intn(len(xs))] }

// subset picks each element with the given chance.
func simSubset[T any](g *simGen, xs []T, percent int) []T {
	var out []T
	for _, x := range xs {
		if g.chance(percent) {
			out = append(out, x)
		}
	}
	return out
}

// tiers draws a tier configuration of 1 to 4 tiers.
func (g *simGen) tiers() []Tier {
	durations := []time.Duration{3 * time.Second, 10 * time.Second, 30 * time.Second, 90 * time.Second}
	n := 1 + g.src.intn(len(durations))
	tiers := []Tier{{Name: "t0", Duration: durations[0]}}
	share, limit := 0.5, 4
	for k := 1; k < n; k++ {
		t := Tier{Name: fmt.Sprintf("t%d", k), Duration: durations[k]}
		if g.chance(50) {
			t.Share = share
			share /= 2
		} else {
			limit = 1 + g.src.intn(limit)
			t.Limit = limit
		}
		tiers = append(tiers, t)
	}
	return tiers
}

// next draws the next operation.
func (g *simGen) next(m *simModel) simOp {
	g.m = m
	r := g.src.intn(g.total)
	kind := simOpKind(0)
	for r >= simWeights[kind] {
		r -= simWeights[kind]
		kind++
	}
	switch kind {
	case simDefineQueue:
		return simOp{kind: kind, queue: g.queueSpec()}
	case simSetKeyLimit:
		return simOp{kind: kind, id: simPick(g, simKeyPatterns), n: g.src.intn(4)}
	case simSetKeyRate:
		return simOp{kind: kind, id: simPick(g, simKeyPatterns), rate: g.rate()}
	case simSetTierLimits:
		return simOp{kind: kind, limits: g.tierLimits()}
	case simSubmit:
		return simOp{kind: kind, jobs: []JobSpec{g.jobSpec()}}
	case simSubmitWorkflow:
		return g.workflow()
	case simInteractive:
		return simOp{kind: kind, jobs: []JobSpec{{ID: g.newID("i"), Queue: g.queueName()}}}
	case simAddWorker:
		return simOp{kind: kind, worker: g.workerSpec()}
	case simComplete:
		return g.complete()
	}
	return g.simple(kind)
}

// simple draws the operations whose only argument is a name or a number.
func (g *simGen) simple(kind simOpKind) simOp {
	op := simOp{kind: kind}
	switch kind {
	case simRemoveWorker, simRenew:
		op.id = g.workerID()
	case simPull:
		op.id, op.n = g.workerID(), g.src.intn(5)
		if g.chance(2) {
			op.n = -1
		}
	case simCancel:
		op.id = g.jobID()
	case simAdvance:
		op.dt = simPick(g, simSteps)
	case simRemoveQueue:
		op.id = g.queueName()
	case simEstimates:
		op.id, op.n = g.queueName(), g.src.intn(6)
	}
	return op
}

func (g *simGen) newID(prefix string) string {
	g.nextID++
	return fmt.Sprintf("%s%d", prefix, g.nextID)
}

// queueName is mostly a defined queue, sometimes any name.
func (g *simGen) queueName() string {
	if names := g.m.sortedQueues(); len(names) > 0 && g.chance(90) {
		return simPick(g, names)
	}
	return simPick(g, simQueueNames)
}

func (g *simGen) workerID() string {
	if ws := g.m.sortedWorkers(); len(ws) > 0 && g.chance(90) {
		return simPick(g, ws).spec.ID
	}
	return simPick(g, simWorkerIDs)
}

// jobID is mostly a live job, sometimes a finished or unknown one.
func (g *simGen) jobID() string {
	if live := g.m.liveJobs(); len(live) > 0 && g.chance(85) {
		return simPick(g, live).spec.ID
	}
	return g.finishedID()
}

// finishedID is a job that finished, or one never submitted.
func (g *simGen) finishedID() string {
	if g.nextID > 0 {
		if id := fmt.Sprintf("j%d", 1+g.src.intn(g.nextID)); !g.m.isLive(id) {
			return id
		}
	}
	return "nobody"
}

func (g *simGen) queueSpec() QueueSpec {
	q := QueueSpec{
		Name:     simPick(g, simQueueNames),
		Priority: g.src.intn(3),
		Order:    Order(g.src.intn(3)),
		Batch:    g.src.intn(4),
		Paused:   g.chance(8),
		Retry:    RetryPolicy{MaxAttempts: g.src.intn(4), Backoff: time.Duration(g.src.intn(3)) * time.Second},
	}
	if g.chance(30) {
		q.Requires = simSubset(g, simCapabilities, 50)
	}
	return q
}

func (g *simGen) workerSpec() WorkerSpec {
	w := WorkerSpec{ID: simPick(g, simWorkerIDs), Slots: 1 + g.src.intn(3), Push: g.chance(60)}
	if g.chance(50) {
		w.Capabilities = simSubset(g, simCapabilities, 60)
	}
	if g.chance(50) {
		w.LeaseTTL = simPick(g, []time.Duration{5 * time.Second, 20 * time.Second})
	}
	return w
}

// rate draws a key rate: mostly a few per second to per ten seconds with
// a small burst, sometimes none (removing it), rarely an invalid one.
func (g *simGen) rate() Rate {
	if g.chance(20) {
		return Rate{}
	}
	r := Rate{Count: 1 + g.src.intn(3), Per: simPick(g, []time.Duration{time.Second, 3 * time.Second, 10 * time.Second}), Burst: 1 + g.src.intn(3)}
	if g.chance(4) {
		r.Burst = 0
	}
	return r
}

// tierLimits draws limits for SetTierLimits, mostly valid.
func (g *simGen) tierLimits() []int {
	n := len(g.m.tiers)
	if g.chance(3) {
		n++
	}
	limits := make([]int, n)
	prev := 5
	for k := 1; k < n; k++ {
		limits[k] = 1 + g.src.intn(prev)
		prev = limits[k]
	}
	if n > 1 && g.chance(5) {
		limits[n-1] = g.src.intn(3) * 3 // 0 or above its predecessor: refused
	}
	return limits
}

// jobSpec draws a job.
func (g *simGen) jobSpec() JobSpec {
	sp := JobSpec{ID: g.newID("j"), Queue: g.queueName(), Priority: g.src.intn(3) - 1}
	if g.chance(25) {
		sp.Default = true
	} else {
		sp.Tier = g.src.intn(len(g.m.tiers) + map[bool]int{true: 1}[g.chance(2)])
	}
	sp.Keys = simSubset(g, simKeys, 15)
	if g.chance(5) && len(sp.Keys) > 0 {
		sp.Keys = append(sp.Keys, sp.Keys[0])
	}
	if g.chance(30) {
		sp.Group = simPick(g, simGroups)
	}
	sp.Mode = Mode(g.src.intn(3))
	sp.After = g.after()
	sp.RunAfterFailure = len(sp.After) > 0 && g.chance(30)
	if g.chance(30) {
		sp.Retry = &RetryPolicy{MaxAttempts: g.src.intn(4), Backoff: time.Duration(g.src.intn(3)) * time.Second}
		if g.chance(30) {
			sp.Retry.MaxBackoff = time.Second
		}
	}
	return sp
}

// after draws dependencies on live jobs, rarely on a finished one.
func (g *simGen) after() []string {
	live := g.m.liveJobs()
	if len(live) == 0 || !g.chance(25) {
		return nil
	}
	deps := []string{simPick(g, live).spec.ID}
	if g.chance(40) {
		deps = append(deps, simPick(g, live).spec.ID)
	}
	if g.chance(4) {
		deps = append(deps, g.finishedID())
	}
	return deps
}

// workflow draws 1 to 4 jobs with edges among them, rarely a cycle.
func (g *simGen) workflow() simOp {
	n := 1 + g.src.intn(4)
	var specs []JobSpec
	for range n {
		specs = append(specs, g.jobSpec())
	}
	var edges []Edge
	for to := 1; to < n; to++ {
		for from := 0; from < to; from++ {
			if g.chance(40) {
				edges = append(edges, Edge{From: specs[from].ID, To: specs[to].ID})
			}
		}
	}
	if len(edges) > 0 && g.chance(10) {
		edges = append(edges, edges[0]) // counts once
	}
	if n > 1 && g.chance(5) {
		edges = append(edges, Edge{From: specs[n-1].ID, To: specs[0].ID})
	}
	return simOp{kind: simSubmitWorkflow, jobs: specs, edges: edges}
}

// complete mostly reports a running attempt; sometimes a stale, repeated
// or unknown one, which must be acknowledged and ignored.
func (g *simGen) complete() simOp {
	if g.last.kind == simComplete && g.chance(5) {
		return g.last
	}
	op := simOp{kind: simComplete, outcome: Succeeded}
	if g.chance(30) {
		op.outcome = FailedAttempt
	}
	var running []*simJob
	for _, j := range g.m.liveJobs() {
		if j.state == simRunning {
			running = append(running, j)
		}
	}
	switch {
	case len(running) > 0 && g.chance(85):
		j := simPick(g, running)
		op.id, op.n = j.spec.ID, j.attempt
		if g.chance(8) {
			op.n--
		}
	case len(g.m.live) > 0 && g.chance(50):
		j := simPick(g, g.m.live)
		op.id, op.n = j.spec.ID, max(1, j.attempt)
	default:
		op.id, op.n = g.finishedID(), 1
	}
	g.last = op
	return op
}
