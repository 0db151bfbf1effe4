package sched

import (
	"errors"
	"fmt"
	"slices"

	"github.com/usherhq/usher/internal/sched/internal/wintree"
)

// CheckInvariants recounts the whole state from the jobs and compares it
// with every counter and index the core keeps. The invariants: limits never
// exceeded (every tier, key, group and worker; a limit lowered under load
// only forbids new starts), no read with a write, every job in exactly one
// state and one place, counters equal to their recount, and the ready index
// exactly the open buckets. It returns all violations found, joined.
func (s *Scheduler) CheckInvariants() error {
	c := &checker{s: s, listed: map[uint32]*bucket{}}
	c.buckets()
	c.jobs()
	c.tiers()
	c.gates()
	c.workers()
	c.queues()
	c.deadlines()
	c.rates()
	return errors.Join(c.errs...)
}

type checker struct {
	s      *Scheduler
	errs   []error
	listed map[uint32]*bucket // jobs found in a FIFO bucket's list
}

func (c *checker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// jobs checks that each job sits where its state says, and only there.
func (c *checker) jobs() {
	s := c.s
	for id, j := range s.jobs.all() {
		if j.id != id {
			c.fail("job %q filed under %q", j.id, id)
		}
		q := j.queue()
		if s.queues[q.spec.Name] != q {
			c.fail("job %q: queue %q is gone", id, q.spec.Name)
		}
		switch j.state {
		case stateQueued:
			c.inQueueHeap(j)
		case stateDelayed:
			if int(j.pos) >= len(s.delayed) || j.pos < 0 || s.delayed[j.pos].slot != j.slot {
				c.fail("delayed job %q is not in the delayed heap", id)
			}
		case stateWaiting:
			if x := s.jobs.ext(j); x == nil || x.pending <= 0 {
				c.fail("waiting job %q has no pending dependency", id)
			}
		case stateRunning:
			c.running(j)
		default:
			c.fail("job %q in state %d is still filed", id, j.state)
		}
	}
	c.table()
}

// table checks the job table: every slot is free or holds a job the index
// finds, and the running jobs are exactly those of runs.
func (c *checker) table() {
	s := c.s
	t := &s.jobs
	free := map[uint32]bool{}
	for _, slot := range t.FreeList() {
		if free[slot] || slot >= t.Used() {
			c.fail("slot %d freed twice or never used", slot)
		}
		free[slot] = true
	}
	live, running := 0, 0
	for slot := range t.Used() {
		j := t.At(slot)
		switch {
		case j.slot != slot || j.gen != t.gen[slot]:
			c.fail("slot %d holds a record of slot %d, generation %d of %d", slot, j.slot, j.gen, t.gen[slot])
		case free[slot]:
			if *j != (job{slot: slot, gen: j.gen}) {
				c.fail("free slot %d holds job %q", slot, j.id)
			}
		case t.get(j.id) != j:
			c.fail("job %q in slot %d is not in the index", j.id, slot)
		default:
			live++
			if j.state == stateRunning {
				running++
			}
		}
	}
	if live != t.len() || live+len(t.FreeList()) != int(t.Used()) {
		c.fail("job table: %d live, %d free, %d used, index holds %d", live, len(t.FreeList()), t.Used(), t.len())
	}
	if running != len(s.runs)-len(s.runFree) {
		c.fail("%d running jobs, runs %d", running, len(s.runs)-len(s.runFree))
	}
}

func (c *checker) inQueueHeap(j *job) {
	q := j.queue()
	if q.strictOrder() {
		h := q.strict
		if j.pos < 0 || int(j.pos) >= len(h) || h[j.pos].slot != j.slot {
			c.fail("queued job %q is not in its strict queue", j.id)
		}
		return
	}
	b := j.bucket
	var in bool
	if q.spec.Order == OrderRandom {
		set := *c.s.jobSet(b)
		in = j.pos >= 0 && int(j.pos) < len(set) && set[j.pos] == j.slot
	} else {
		in = c.listed[j.slot] == b
	}
	if !in || b.tier != j.tier || b.prio != bucketPrio(q, j.prio) {
		c.fail("queued job %q is not in its bucket", j.id)
	}
	if x := c.s.jobs.ext(j); x != nil && x.pending != 0 {
		c.fail("queued job %q has %d pending dependencies", j.id, x.pending)
	}
}

func (c *checker) running(j *job) {
	if j.pos < 0 || int(j.pos) >= len(c.s.runs) || c.s.runs[j.pos].job != j.slot || c.s.runs[j.pos].worker == nil {
		c.fail("running job %q has no running attempt", j.id)
		return
	}
	r := c.s.run(j)
	w := r.worker
	if c.s.workers[w.id] != w {
		c.fail("job %q runs on unknown worker %q", j.id, w.id)
	}
	if int(r.wpos) >= len(w.jobs) || w.jobs[r.wpos] != j {
		c.fail("job %q is not in its worker's list", j.id)
	}
	if j.isDefault() && (int(r.cpos) >= len(c.s.defaults[r.tier]) || c.s.defaults[r.tier][r.cpos] != j) {
		c.fail("default job %q is not in the default set of tier %d", j.id, r.tier)
	}
	if j.isInteractive() && (int(r.cpos) >= len(c.s.interactive) || c.s.interactive[r.cpos] != j) {
		c.fail("interactive job %q is not in the interactive set", j.id)
	}
	if j.isInteractive() && r.tier != 0 {
		c.fail("interactive job %q runs in tier %d", j.id, r.tier)
	}
}

// tiers recounts running jobs per tier and checks the nested limits.
func (c *checker) tiers() {
	s := c.s
	n := len(s.tiers)
	count := make([]int, n)
	defaults := make([]int, n)
	interactive := 0
	for _, j := range s.jobs.all() {
		if j.state != stateRunning {
			continue
		}
		tier := s.run(j).tier
		count[tier]++
		if j.isDefault() {
			defaults[tier]++
		}
		if j.isInteractive() {
			interactive++
		}
	}
	for t := range n {
		if count[t] != s.running[t] {
			c.fail("tier %d: counter %d, recount %d", t, s.running[t], count[t])
		}
		if defaults[t] != len(s.defaults[t]) {
			c.fail("tier %d: %d default jobs in the set, recount %d", t, len(s.defaults[t]), defaults[t])
		}
	}
	if interactive != len(s.interactive) {
		c.fail("interactive set %d, recount %d", len(s.interactive), interactive)
	}
	for k := range n {
		// Tier 0's limit is every slot, which holds worker by worker (see
		// workers): a worker whose slots fell under load keeps its extra
		// jobs without stopping the others from using their free slots.
		if k > 0 && s.count(k) > s.limits[k] && c.startedSince(s.tierLow[k], func(j *job) bool { return int(s.run(j).tier) >= k }) {
			c.fail("tier %d: %d running, limit %d", k, s.count(k), s.limits[k])
		}
		if k > 0 && s.limits[k] > s.limits[k-1] {
			c.fail("tier %d: limit %d above tier %d's %d", k, s.limits[k], k-1, s.limits[k-1])
		}
	}
}

// startedSince says whether a running job matching f started after seq: a
// count above a limit is legal only when the limit fell under load and no
// job has started against it since.
func (c *checker) startedSince(seq uint64, f func(*job) bool) bool {
	for _, j := range c.s.jobs.all() {
		if j.state == stateRunning && c.s.run(j).startSeq > seq && f(j) {
			return true
		}
	}
	return false
}

// gates recounts holders of every key, group and mode.
func (c *checker) gates() {
	s := c.s
	holders := map[*gate]int{}
	for _, j := range s.jobs.all() {
		if j.state == stateRunning {
			for _, r := range j.bucket.gates {
				holders[r.g]++
			}
		}
	}
	check := func(g *gate) {
		if gc := s.gcs.At(g.num); gc != g.gateCounts || gc.g != g || gc.mode != (g.kind == gateMode) {
			c.fail("gate %s: counters misfiled", g.label())
		}
		if holders[g] != int(g.running) {
			c.fail("gate %s: counter %d, recount %d", g.label(), g.running, holders[g])
		}
		if g.closed != g.shouldClose() {
			c.fail("gate %s: closed=%v but rule says %v", g.label(), g.closed, g.shouldClose())
		}
		if g.kind != gateMode && int(g.running) > g.limit {
			holds := func(j *job) bool { return slicesContains(j.bucket.gates, g) }
			if g.kind == gateGroup || c.startedSince(g.lowered, holds) {
				c.fail("gate %s: %d running, limit %d", g.label(), g.running, g.limit)
			}
		}
	}
	for name, g := range s.keyGates {
		if g.name != name || g.kind != gateKey {
			c.fail("key gate %q filed as %q", g.name, name)
		}
		check(g)
	}
	for _, g := range s.groups {
		check(g)
	}
	check(s.reads)
	check(s.writes)
	if n := s.gcs.Live(); n != len(s.keyGates)+len(s.groups)+2 {
		c.fail("%d gate counters in use for %d gates", n, len(s.keyGates)+len(s.groups)+2)
	}
	if s.reads.running > 0 && s.writes.running > 0 {
		c.fail("%d reads and %d writes run together", s.reads.running, s.writes.running)
	}
}

func slicesContains(gs []gateRef, g *gate) bool {
	for _, x := range gs {
		if x.g == g {
			return true
		}
	}
	return false
}

// buckets checks references, closed counts, lists and the ready index.
func (c *checker) buckets() {
	s := c.s
	refs := map[*bucket]int{}
	queued := map[*bucket]int{}
	live := map[*gate]int{}
	for _, j := range s.jobs.all() {
		refs[j.bucket]++
		if j.state == stateQueued {
			queued[j.bucket]++
		}
		q := j.bucket.queue
		if s.bkts.lookup(q, j.bucket.sig, j.bucket.tier, j.bucket.prio) != j.bucket || q.buckets[j.bucket.qpos] != j.bucket {
			c.fail("job %q: bucket is not filed", j.id)
		}
	}
	n, idle := 0, 0
	for _, q := range s.queues {
		for i, b := range q.buckets {
			n++
			if b.refs == 0 {
				idle++
				if b.flags&listed == 0 {
					c.fail("idle bucket %q of %s is not listed for the sweep", b.sig, q.spec.Name)
				}
			}
			if int(b.qpos) != i || b.queue != q || s.bkts.At(b.num) != b {
				c.fail("bucket %q of %s is misfiled", b.sig, q.spec.Name)
			}
			c.bucket(b, refs[b], queued[b], live)
		}
	}
	if n != s.nbuckets || idle != s.idleBuckets || s.bkts.find.Len() != n || s.bkts.Live() != n {
		c.fail("%d buckets (%d idle) counted, recount %d (%d idle), table %d, lookup %d",
			s.nbuckets, s.idleBuckets, n, idle, s.bkts.Live(), s.bkts.find.Len())
	}
	c.liveGates(live)
}

// bucket checks one bucket against the recounts of its jobs.
func (c *checker) bucket(b *bucket, refs, queued int, live map[*gate]int) {
	name := b.queue.spec.Name
	if int(b.refs) != refs {
		c.fail("bucket %q of %s: refs %d, recount %d", b.sig, name, b.refs, refs)
	}
	if int(b.queued) != queued {
		c.fail("bucket %q of %s: queued %d, recount %d", b.sig, name, b.queued, queued)
	}
	closed := int32(0)
	for _, r := range b.gates {
		g := r.g
		if b.refs > 0 {
			live[g]++
		}
		if g.closed {
			closed++
		}
		if int(r.pos) >= len(g.buckets) || g.buckets[r.pos] != b {
			c.fail("bucket %q: not listed by gate %s", b.sig, g.label())
		}
	}
	if b.flags&parked != 0 {
		closed++
		if !slices.ContainsFunc(b.gates, func(r gateRef) bool { return r.g.dry && slices.Contains(c.s.parked[r.g], b) }) {
			c.fail("bucket %q: parked, yet no gate of it lists it", b.sig)
		}
	}
	if closed != b.closed {
		c.fail("bucket %q: closed %d, recount %d", b.sig, b.closed, closed)
	}
	if rated := slices.ContainsFunc(b.gates, func(r gateRef) bool { return r.g.rated }); rated != (b.flags&ratedGates != 0) {
		c.fail("bucket %q: rated flag %v, yet a gate is rated: %v", b.sig, !rated, rated)
	}
	if len(b.gates) > 0 && b.gate0 != b.gates[0].g.num+1 || len(b.gates) == 0 && b.gate0 != 0 || (b.flags&manyGates != 0) != (len(b.gates) > 1) {
		c.fail("bucket %q: first gate not cached", b.sig)
	}
	switch b.queue.spec.Order {
	case OrderFIFO:
		c.list(b)
	case OrderRandom:
		if n := len(*c.s.jobSet(b)); n != int(b.queued) {
			c.fail("bucket %q of %s: %d in its set, %d queued", b.sig, name, n, b.queued)
		}
		if b.pos >= 0 && b.set != nil {
			c.fail("bucket %q of %s: visible, yet its record holds a set", b.sig, name)
		}
	}
	if b.visible() != (b.pos >= 0) {
		c.fail("bucket %q tier %d: in ready index %v, should be %v", b.sig, b.tier, b.pos >= 0, b.visible())
	} else if q := b.queue; b.pos >= 0 {
		var stale bool
		if q.spec.Order == OrderFIFO {
			e := q.tree[b.tier].Leaf(b.pos)
			stale = e.Num != b.num || e.Key != b.headKey || e.First != b.head
		} else {
			stale = b.lvl.set[b.pos].b != b.num
		}
		if stale {
			c.fail("bucket %q tier %d: ready index entry is stale", b.sig, b.tier)
		}
	}
}

// list walks a FIFO bucket's list: queued jobs of the bucket in key order,
// each linked both ways, with the keys the bucket and the records repeat.
func (c *checker) list(b *bucket) {
	t := &c.s.jobs
	n, prev := int32(0), noSlot
	var prevKey uint64
	for slot := b.head; slot != noSlot; slot = t.At(slot).next {
		j := t.At(slot)
		if n++; n > b.queued || j.bucket != b || j.state != stateQueued || c.listed[slot] != nil {
			c.fail("bucket %q: list runs into job %q (%d of %d queued)", b.sig, j.id, n, b.queued)
			return
		}
		c.listed[slot] = b
		if prev == noSlot && (b.headKey != j.key) || prev != noSlot && (uint32(j.pos) != prev || prevKey != j.key || t.At(prev).key > j.key) {
			c.fail("bucket %q: job %q is misplaced in its list", b.sig, j.id)
		}
		prev, prevKey = slot, j.nextKey
	}
	if n != b.queued || b.tail != prev {
		c.fail("bucket %q: list of %d jobs ends at %d, bucket says %d jobs ending at %d", b.sig, n, prev, b.queued, b.tail)
	}
}

// liveGates checks each gate's count of live buckets against a recount.
func (c *checker) liveGates(live map[*gate]int) {
	s := c.s
	for _, gs := range []map[string]*gate{s.keyGates, s.groups} {
		for _, g := range gs {
			if int(g.live) != live[g] {
				c.fail("gate %s: %d live buckets, recount %d", g.label(), g.live, live[g])
			}
		}
	}
}

// workers recounts slots and checks that free lists are right.
func (c *checker) workers() {
	s := c.s
	slots := 0
	for id, w := range s.workers {
		slots += w.slots
		if w.id != id {
			c.fail("worker %q filed under %q", w.id, id)
		}
		if len(w.jobs) > w.slots && c.startedSince(w.lowered, func(j *job) bool { return s.run(j).worker == w }) {
			c.fail("worker %q: %d jobs on %d slots", id, len(w.jobs), w.slots)
		}
		shouldBeFree := w.push && w.free() > 0
		if shouldBeFree != (w.fpos >= 0) {
			c.fail("worker %q: in free list %v, should be %v", id, w.fpos >= 0, shouldBeFree)
		}
		for _, j := range w.jobs {
			if j.state != stateRunning || s.run(j).worker != w || s.jobs.get(j.id) != j {
				c.fail("worker %q lists job %q that does not run there", id, j.id)
			}
		}
	}
	if slots != s.totalSlots {
		c.fail("total slots %d, recount %d", s.totalSlots, slots)
	}
}

// queues recounts each queue's jobs per state.
func (c *checker) queues() {
	s := c.s
	type counts struct{ queued, waiting, delayed, running, unconfirmed int }
	per := map[*queue]*counts{}
	for _, q := range s.queues {
		per[q] = &counts{}
	}
	for _, j := range s.jobs.all() {
		n := per[j.queue()]
		if n == nil {
			continue
		}
		switch j.state {
		case stateQueued:
			n.queued++
		case stateWaiting:
			n.waiting++
		case stateDelayed:
			n.delayed++
		case stateRunning:
			n.running++
			if s.run(j).unconfirmed {
				n.unconfirmed++
			}
		}
	}
	for name, q := range s.queues {
		if n := per[q]; n.unconfirmed != q.unconfirmed {
			c.fail("queue %q: %d unconfirmed starts, recount %d", name, q.unconfirmed, n.unconfirmed)
		}
		n := per[q]
		if n.queued != q.queued || n.waiting != q.waiting || n.delayed != q.delayed || n.running != q.running {
			c.fail("queue %q: counters %d/%d/%d/%d queued/waiting/delayed/running, recount %d/%d/%d/%d",
				name, q.queued, q.waiting, q.delayed, q.running, n.queued, n.waiting, n.delayed, n.running)
		}
		if q.strictOrder() && len(q.strict) != q.queued {
			c.fail("strict queue %q: heap %d, queued %d", name, len(q.strict), q.queued)
		}
		c.readyIndex(name, q)
	}
}

// readyIndex checks a queue's ready index: only its order's kind, every
// entry's bucket points back at it and is visible (bucket checks the
// converse), and each tree node holds the least of its children.
func (c *checker) readyIndex(name string, q *queue) {
	if len(q.tree) > 0 != (q.spec.Order == OrderFIFO) || len(q.rand) > 0 != (q.spec.Order == OrderRandom) {
		c.fail("queue %q: ready index of another order", name)
	}
	c.randLevels(name, q)
	for tier := range q.tree {
		t := &q.tree[tier]
		if err := t.Check(); err != nil {
			c.fail("queue %q tier %d: %v", name, tier, err)
		}
		for l := range int32(t.Leaves()) {
			if e := t.Leaf(l); e.Key != wintree.NoKey {
				if b := c.s.bkts.At(e.Num); b.queue != q || int(b.tier) != tier || b.pos != l || !b.visible() {
					c.fail("queue %q tier %d: leaf %d is misfiled", name, tier, l)
				}
			}
		}
	}
}

// rates checks the key rate gates: each has the rate its key resolves to,
// never owes more than its burst (so that no window of length t saw more
// than burst + t/interval starts), has buckets parked (is dry) until no later
// than when its next token is due, and then waits
// in rateWake; rateWake is a heap whose live entries are exactly the dry
// gates.
func (c *checker) rates() {
	s := c.s
	now := s.nowNS()
	dry := 0
	for name, g := range s.keyGates {
		want, _ := s.keyRate.lookup(name)
		b := s.gcs.rate(g.num)
		if b.rateSpec != want || g.rated != (want.interval > 0) {
			c.fail("key %s: rate %+v, want %+v", name, b.rateSpec, want)
		}
		if _, ok := s.rateMemo[name]; ok {
			c.fail("key %s: a live gate and a remembered bucket", name)
		}
		if g.dry != (len(s.parked[g]) > 0) {
			c.fail("key %s: dry %v with %d parked buckets", name, g.dry, len(s.parked[g]))
		}
		for _, pb := range s.parked[g] {
			if pb.flags&parked == 0 || !slicesContains(pb.gates, g) {
				c.fail("key %s: parks bucket %q, which is not parked on it", name, pb.sig)
			}
		}
		if !g.rated {
			if g.dry {
				c.fail("key %s: dry without a rate", name)
			}
			continue
		}
		if b.tat-now > b.burst*b.interval {
			c.fail("key %s: owes %d ns of tokens, more than its burst of %d×%d ns", name, b.tat-now, b.burst, b.interval)
		}
		if g.dry {
			dry++
			if due := b.nextToken(); b.due > due {
				c.fail("key %s: parked until %d, after its token is due at %d", name, b.due, due)
			}
		}
	}
	waiting := map[*gate]bool{}
	for i, e := range s.rateWake {
		if s.rateLive(e) {
			if s.keyGates[e.v.name] != e.v {
				c.fail("rate wake entry %d (%s): its gate is gone", i, e.v.name)
			}
			waiting[e.v] = true
		}
		if !s.rateWake.ordered(i) {
			c.fail("rate wake entry %d is due before its parent", i)
		}
	}
	if dry != len(waiting) || dry != len(s.parked) {
		c.fail("%d dry key gates, %d waiting for a token, %d with parked buckets", dry, len(waiting), len(s.parked))
	}
}

// Idle reports whether nothing is queued, waiting, delayed or running and
// every counter is back at zero.
func (s *Scheduler) Idle() error {
	var errs []error
	if s.jobs.len() != 0 {
		errs = append(errs, fmt.Errorf("%d jobs still known", s.jobs.len()))
	}
	for t, n := range s.running {
		if n != 0 {
			errs = append(errs, fmt.Errorf("tier %d counts %d running", t, n))
		}
	}
	for _, gs := range []map[string]*gate{s.keyGates, s.groups} {
		for _, g := range gs {
			if g.running != 0 || g.live != 0 {
				errs = append(errs, fmt.Errorf("gate %s: %d running, %d live buckets", g.label(), g.running, g.live))
			}
		}
	}
	if s.reads.running != 0 || s.writes.running != 0 {
		errs = append(errs, fmt.Errorf("%d reads, %d writes counted", s.reads.running, s.writes.running))
	}
	for name, q := range s.queues {
		for _, b := range q.buckets {
			if b.refs != 0 || b.queued != 0 {
				errs = append(errs, fmt.Errorf("bucket %q of %s holds %d jobs", b.sig, name, b.refs))
			}
		}
		if q.queued+q.waiting+q.delayed+q.running != 0 {
			errs = append(errs, fmt.Errorf("queue %q counts jobs", name))
		}
		for t := range q.tree {
			if q.tree[t].Len() != 0 {
				errs = append(errs, fmt.Errorf("queue %q tier %d: ready index not empty", name, t))
			}
		}
		for t := range q.rand {
			if len(q.rand[t].heap) != 0 {
				errs = append(errs, fmt.Errorf("queue %q tier %d: ready index not empty", name, t))
			}
		}
	}
	if len(s.delayed) != 0 || len(s.interactive) != 0 || len(s.deadlines) != 0 {
		errs = append(errs, fmt.Errorf("delayed %d, interactive %d, deadlines %d", len(s.delayed), len(s.interactive), len(s.deadlines)))
	}
	return errors.Join(errs...)
}

// deadlines checks the deadline heap: each entry is a live job that has
// not started, which knows its index, and no entry is before its parent.
func (c *checker) deadlines() {
	s := c.s
	for i, e := range s.deadlines {
		j := s.jobs.At(e.slot)
		x := s.jobs.ext(j)
		switch {
		case s.jobs.get(j.id) != j:
			c.fail("deadline entry %d: slot %d holds no live job", i, e.slot)
		case x == nil || int(x.dpos) != i+1:
			c.fail("job %q: deadline entry %d, index not written back", j.id, i)
		case j.state == stateRunning:
			c.fail("running job %q still has a deadline", j.id)
		}
		if i > 0 && s.deadlines[(i-1)/2].at > e.at {
			c.fail("deadline heap out of order at %d", i)
		}
	}
}

// randLevels checks a random queue's levels: each entry's bucket points
// back at it, is visible and has the level's tier and priority; each level
// counts the buckets naming it and is in its tier's heap exactly while it
// has visible buckets; each heap node's priority is at least its
// children's.
func (c *checker) randLevels(name string, q *queue) {
	refs := make(map[*randLevel]int32)
	for _, b := range q.buckets {
		if (b.lvl != nil) != (q.spec.Order == OrderRandom) {
			c.fail("queue %q: bucket %q level %v for order %v", name, b.sig, b.lvl != nil, q.spec.Order)
			continue
		}
		if b.lvl != nil {
			refs[b.lvl]++
			if q.rand[b.tier].levels[b.prio] != b.lvl {
				c.fail("queue %q: bucket %q names a level not its tier's and priority's", name, b.sig)
			}
		}
	}
	for t := range q.rand {
		rt := &q.rand[t]
		for prio, l := range rt.levels {
			if l.prio != prio || l.refs != refs[l] || l.refs == 0 {
				c.fail("queue %q tier %d: level %d counts %d buckets, %d name it", name, t, prio, l.refs, refs[l])
			}
			if in := l.hpos >= 0 && int(l.hpos) < len(rt.heap) && rt.heap[l.hpos] == l; in != (len(l.set) > 0) {
				c.fail("queue %q tier %d: level %d in heap %v with %d visible buckets", name, t, prio, in, len(l.set))
			}
			for i, e := range l.set {
				if b := c.s.bkts.At(e.b); b.queue != q || int(b.tier) != t || b.lvl != l || int(b.pos) != i || !b.visible() {
					c.fail("queue %q tier %d priority %d: ready entry %d is misfiled", name, t, prio, i)
				}
			}
		}
		for i, l := range rt.heap {
			if rt.levels[l.prio] != l || (i > 0 && rt.heap[(i-1)/2].prio < l.prio) {
				c.fail("queue %q tier %d: level heap out of order at %d", name, t, i)
			}
		}
	}
}
