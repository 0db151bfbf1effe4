package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Gates carry the rules that depend on what runs elsewhere (seed 004's
// per-key limits, seed 002's groups and read/write exclusion). A gate is
// closed while one more holder would break its rule. Queued jobs with the
// same queue, keys, group and mode share a bucket; a bucket is visible to its
// queue only while all its gates are open, so finding the next job never
// looks at blocked jobs (seed 004's ready index). Opening or closing a gate
// touches the buckets that hold it, never the jobs.

const unlimited = math.MaxInt

// maxIdleBuckets bounds the empty buckets kept for reuse (about 200 bytes
// each) when there are fewer live ones.
const maxIdleBuckets = 1 << 16

type gateKind uint8

const (
	gateKey gateKind = iota
	gateGroup
	gateMode
)

type gate struct {
	name     string
	kind     gateKind
	limit    int // running holders allowed (keys and groups)
	running  int // running holders
	closed   bool
	buckets  []*bucket
	live     int    // buckets with live jobs that hold the gate
	opposite *gate  // mode gates: the other mode
	lowered  uint64 // startSeq when the limit last fell below running
}

// shouldClose says whether one more holder would break the gate's rule.
func (g *gate) shouldClose() bool {
	if g.kind == gateMode {
		return g.opposite.running > 0
	}
	return g.running >= g.limit
}

// bucket groups a queue's jobs that pass the same gates. The fields the
// hot path touches come first, so that they share a cache line.
type bucket struct {
	refs   int32        // live jobs (any state) with this signature
	queued int32        // of them, ready in the queue
	closed int32        // closed gates
	idle   bool         // refs fell to 0; the bucket awaits the next sweep
	listed bool         // in Scheduler.idleList (at most once)
	tiers  []bucketTier // nil in strict queues; else inline[:n] up to inlineTiers
	inline [inlineTiers]bucketTier
	queue  *queue
	sig    string
	gates  []*gate
	gpos   []int32 // index of this bucket in gates[i].buckets
}

// bucketTier is a bucket's queued jobs of one tier (FIFO and random queues
// only: a heap in FIFO order, or a set in random ones) and the bucket's
// index in its queue's ready index for that tier.
type bucketTier struct {
	jobs jobHeap // FIFO queues
	set  slotSet // random queues
	pos  int32   // index in queue.ready[tier]; -1 when not there
}

func (bt *bucketTier) len() int { return len(bt.jobs) + len(bt.set) }

// inlineTiers is how many tiers a bucket keeps in its own allocation (seed
// 000's three), so that the hot path touches one object, not two.
const inlineTiers = 3

// resetTiers gives the bucket n empty tiers (none for strict queues).
func (b *bucket) resetTiers(n int, strict bool) {
	b.inline = [inlineTiers]bucketTier{}
	switch {
	case strict:
		b.tiers = nil
		return
	case n <= inlineTiers:
		b.tiers = b.inline[:n]
	default:
		b.tiers = make([]bucketTier, n)
	}
	for t := range b.tiers {
		b.tiers[t].pos = -1
	}
}

// signature names a set of gates: a lone key is its own name; anything else
// is a NUL-separated list that keys (which hold no NUL) cannot forge.
func signature(keys []string, group string, mode Mode) string {
	if len(keys) == 1 && group == "" && mode == ModeNone {
		return keys[0]
	}
	if len(keys) == 0 && group == "" && mode == ModeNone {
		return ""
	}
	var b strings.Builder
	b.WriteByte(0)
	b.WriteByte(byte('0' + mode))
	b.WriteString(group)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
	}
	return b.String()
}

func (s *Scheduler) bucketFor(q *queue, keys []string, group string, mode Mode) *bucket {
	keys = dedupe(keys)
	sig := signature(keys, group, mode)
	if b, ok := q.buckets[sig]; ok {
		return b
	}
	b := &bucket{queue: q, sig: sig}
	b.resetTiers(len(s.tiers), q.strictOrder())
	for _, k := range keys {
		s.attach(b, s.keyGate(k))
	}
	if group != "" {
		s.attach(b, s.groupGate(group))
	}
	switch mode {
	case ModeRead:
		s.attach(b, s.reads)
	case ModeWrite:
		s.attach(b, s.writes)
	}
	q.buckets[sig] = b
	s.nbuckets++
	return b
}

func (s *Scheduler) attach(b *bucket, g *gate) {
	b.gates = append(b.gates, g)
	b.gpos = append(b.gpos, int32(len(g.buckets)))
	g.buckets = append(g.buckets, b)
	if g.closed {
		b.closed++
	}
}

// refBucket counts a new live job of the bucket.
func (s *Scheduler) refBucket(b *bucket) {
	if b.idle {
		b.idle = false
		s.idleBuckets--
	}
	if b.refs == 0 {
		for _, g := range b.gates {
			g.live++
		}
	}
	b.refs++
}

// releaseBucket drops a job's reference. A bucket left without jobs stays
// for reuse until a sweep, which runs once there are more than
// maxIdleBuckets idle buckets and more idle than live ones (seed 004: delete
// zero entries once in a while), so that a key that empties and fills again
// costs no allocation.
func (s *Scheduler) releaseBucket(b *bucket) {
	b.refs--
	if b.refs > 0 {
		return
	}
	for _, g := range b.gates {
		g.live--
	}
	b.idle = true
	s.idleBuckets++
	if !b.listed {
		b.listed = true
		s.idleList = append(s.idleList, b)
	}
	if s.idleBuckets > maxIdleBuckets && 2*s.idleBuckets > s.nbuckets {
		s.sweepBuckets()
	}
}

// sweepBuckets removes every idle bucket, in the order they became idle.
func (s *Scheduler) sweepBuckets() {
	for _, b := range s.idleList {
		b.listed = false
		if b.idle && b.queue.buckets[b.sig] == b {
			s.dropBucket(b)
		}
	}
	clear(s.idleList)
	s.idleList = s.idleList[:0]
	s.idleBuckets = 0
}

// dropBucket removes an idle bucket and any key or group gate no bucket
// holds any more.
func (s *Scheduler) dropBucket(b *bucket) {
	b.idle = false
	delete(b.queue.buckets, b.sig)
	s.nbuckets--
	for i, g := range b.gates {
		pos := b.gpos[i]
		last := len(g.buckets) - 1
		if int(pos) != last {
			moved := g.buckets[last]
			g.buckets[pos] = moved
			moved.gpos[slices.Index(moved.gates, g)] = pos
		}
		g.buckets[last] = nil
		g.buckets = g.buckets[:last]
		if len(g.buckets) == 0 && g.running == 0 {
			switch g.kind {
			case gateKey:
				delete(s.keyGates, g.name)
			case gateGroup:
				delete(s.groups, g.name)
			}
		}
	}
}

func (s *Scheduler) keyGate(k string) *gate {
	if g, ok := s.keyGates[k]; ok {
		return g
	}
	g := &gate{name: k, kind: gateKey, limit: s.keyLimit.of(k)}
	s.keyGates[k] = g
	return g
}

func (s *Scheduler) groupGate(name string) *gate {
	if g, ok := s.groups[name]; ok {
		return g
	}
	g := &gate{name: name, kind: gateGroup, limit: 1}
	s.groups[name] = g
	return g
}

// hold and unhold count a starting or ending job against its gates.
func (s *Scheduler) hold(b *bucket) {
	for _, g := range b.gates {
		g.running++
		if g.kind == gateMode {
			if g.running == 1 {
				s.setClosed(g.opposite, true)
			}
		} else if g.running >= g.limit {
			s.setClosed(g, true)
		}
	}
}

func (s *Scheduler) unhold(b *bucket) {
	for _, g := range b.gates {
		g.running--
		if g.kind == gateMode {
			if g.running == 0 {
				s.setClosed(g.opposite, false)
			}
		} else if g.running < g.limit {
			s.setClosed(g, false)
		}
	}
}

// setClosed opens or closes a gate and shows or hides its buckets.
func (s *Scheduler) setClosed(g *gate, closed bool) {
	if g.closed == closed {
		return
	}
	g.closed = closed
	for _, b := range g.buckets {
		if closed {
			b.closed++
			if b.closed == 1 {
				b.queue.hide(b)
			}
		} else {
			b.closed--
			if b.closed == 0 {
				b.queue.show(b)
			}
		}
	}
}

// keyLimits resolves a key's limit: an exact limit wins, then the longest
// matching prefix pattern ("net:*"), else the key is unlimited.
type keyLimits struct {
	exact    map[string]int
	patterns []keyPattern // longest prefix first
}

type keyPattern struct {
	prefix string
	limit  int
}

func (l *keyLimits) of(k string) int {
	if n, ok := l.exact[k]; ok {
		return n
	}
	for _, p := range l.patterns {
		if strings.HasPrefix(k, p.prefix) {
			return p.limit
		}
	}
	return unlimited
}

// SetKeyLimit sets how many running jobs may hold a key at once, across all
// queues. A pattern ending in '*' sets the limit of every key with that
// prefix (an exact key's own limit wins; among patterns the longest wins).
// A limit of 0 removes the limit. Lowering a limit below the running count
// stops no job; new ones wait until the count drops.
func (s *Scheduler) SetKeyLimit(pattern string, limit int) error {
	if pattern == "" || pattern == "*" && limit < 0 || limit < 0 {
		return fmt.Errorf("sched: key limit %q=%d: need a non-empty pattern and a limit of at least 0", pattern, limit)
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		s.keyLimit.patterns = slices.DeleteFunc(s.keyLimit.patterns, func(p keyPattern) bool { return p.prefix == prefix })
		if limit > 0 {
			s.keyLimit.patterns = append(s.keyLimit.patterns, keyPattern{prefix, limit})
			slices.SortStableFunc(s.keyLimit.patterns, func(a, b keyPattern) int { return len(b.prefix) - len(a.prefix) })
		}
	} else if limit > 0 {
		s.keyLimit.exact[pattern] = limit
	} else {
		delete(s.keyLimit.exact, pattern)
	}
	for _, g := range s.keyGates {
		s.setGateLimit(g, s.keyLimit.of(g.name))
	}
	return nil
}

func (s *Scheduler) setGateLimit(g *gate, limit int) {
	if g.limit == limit {
		return
	}
	if limit < g.running {
		g.lowered = s.startSeq
	}
	g.limit = limit
	s.setClosed(g, g.shouldClose())
}
