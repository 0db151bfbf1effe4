package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Gates carry the rules that depend on what runs elsewhere: per-key limits
// (docs/design.md, "Per-key limits, priorities and random picks")
// and groups and read/write exclusion
// (docs/design.md, "Exclusive read/write groups and strict order"). A gate is
// closed while one more holder would break its rule. Queued jobs with the
// same queue, keys, group and mode (and tier, and in FIFO queues priority:
// see bucket.go) share a bucket; a bucket is visible to its queue only while
// all its gates are open, so finding the next job never looks at blocked
// jobs (the ready index). Opening or closing a gate touches the
// buckets that hold it, never the jobs.

const unlimited = math.MaxInt

// maxIdleBuckets bounds the empty buckets kept for reuse (128 bytes each)
// when there are fewer live ones.
const maxIdleBuckets = 1 << 16

type gateKind uint8

const (
	gateKey gateKind = iota
	gateGroup
	gateMode
)

// gate is a key, group or mode. Its counters, which every start and end
// reads, sit in a gateCounts record of a dense table (32 bytes a gate, so
// that ten thousand keys take 320 KiB); the rest is read only when a gate
// opens or closes.
type gate struct {
	*gateCounts
	name     string
	kind     gateKind
	buckets  []*bucket
	opposite *gate  // mode gates: the other mode
	lowered  uint64 // startSeq when the limit last fell below running
}

type gateCounts struct {
	running int32 // running holders
	live    int32 // buckets with live jobs that hold the gate
	limit   int   // running holders allowed (keys and groups)
	closed  bool
	mode    bool   // a mode gate
	rated   bool   // key gates: a rate limits starts (rate.go)
	dry     bool   // rated, with buckets parked until rate.due (Scheduler.parked)
	num     uint32 // the record's number in gateTable
	g       *gate
}

func (s *Scheduler) newGate(name string, kind gateKind, limit int) *gate {
	g := &gate{name: name, kind: kind}
	s.gcs.add(g)
	g.limit = limit
	return g
}

// shouldClose says whether one more holder would break the gate's rule.
func (g *gate) shouldClose() bool {
	if g.kind == gateMode {
		return g.opposite.running > 0
	}
	return int(g.running) >= g.limit
}

func (s *Scheduler) keyGate(k string) *gate {
	if g, ok := s.keyGates[k]; ok {
		return g
	}
	g := s.newGate(k, gateKey, s.keyLimit.of(k))
	s.keyGates[k] = g
	s.initRate(g)
	return g
}

func (s *Scheduler) groupGate(name string) *gate {
	if g, ok := s.groups[name]; ok {
		return g
	}
	g := s.newGate(name, gateGroup, 1)
	s.groups[name] = g
	return g
}

// hold and unhold count a starting or ending job against its gates; a
// start at now takes a token of each rated key.
func (s *Scheduler) hold(b *bucket, now int64) {
	if b.flags&manyGates == 0 {
		if b.gate0 != 0 {
			s.holdGate(s.gcs.At(b.gate0-1), now)
		}
		return
	}
	for _, r := range b.gates {
		s.holdGate(r.g.gateCounts, now)
	}
}

func (s *Scheduler) holdGate(c *gateCounts, now int64) {
	c.running++
	if c.mode {
		if c.running == 1 {
			s.setClosed(c.g.opposite, true)
		}
		return
	}
	if c.rated {
		s.gcs.rate(c.num).take(now)
	}
	if !c.closed && int(c.running) >= c.limit {
		s.setClosed(c.g, true)
	}
}

func (s *Scheduler) unhold(b *bucket) {
	if b.flags&manyGates == 0 {
		if b.gate0 != 0 {
			s.unholdGate(s.gcs.At(b.gate0 - 1))
		}
		return
	}
	for _, r := range b.gates {
		s.unholdGate(r.g.gateCounts)
	}
}

func (s *Scheduler) unholdGate(c *gateCounts) {
	c.running--
	if c.mode {
		if c.running == 0 {
			s.setClosed(c.g.opposite, false)
		}
	} else if c.closed && int(c.running) < c.limit {
		s.setClosed(c.g, false)
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
				s.hide(b)
			}
		} else {
			b.closed--
			if b.closed == 0 {
				s.show(b)
			}
		}
	}
}

// keyTable resolves a key's setting (a concurrency limit, a rate): an
// exact setting wins, then the longest matching prefix pattern ("net:*").
type keyTable[T any] struct {
	exact    map[string]T
	patterns []keyPattern[T] // longest prefix first
}

type keyPattern[T any] struct {
	prefix string
	v      T
}

// lookup returns the setting that applies to key k, if any.
func (l *keyTable[T]) lookup(k string) (T, bool) {
	if v, ok := l.exact[k]; ok {
		return v, true
	}
	for _, p := range l.patterns {
		if strings.HasPrefix(k, p.prefix) {
			return p.v, true
		}
	}
	var zero T
	return zero, false
}

// set sets the setting of a key or pattern; set false removes it.
func (l *keyTable[T]) set(pattern string, v T, set bool) {
	if l.exact == nil {
		l.exact = map[string]T{}
	}
	prefix, ok := strings.CutSuffix(pattern, "*")
	if !ok {
		if set {
			l.exact[pattern] = v
		} else {
			delete(l.exact, pattern)
		}
		return
	}
	l.patterns = slices.DeleteFunc(l.patterns, func(p keyPattern[T]) bool { return p.prefix == prefix })
	if set {
		l.patterns = append(l.patterns, keyPattern[T]{prefix, v})
		slices.SortStableFunc(l.patterns, func(a, b keyPattern[T]) int { return len(b.prefix) - len(a.prefix) })
	}
}

// keyLimits resolves a key's concurrency limit; a key without one is
// unlimited.
type keyLimits struct{ keyTable[int] }

func (l *keyLimits) of(k string) int {
	if n, ok := l.lookup(k); ok {
		return n
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
	s.keyLimit.set(pattern, limit, limit > 0)
	for _, g := range s.keyGates {
		s.setGateLimit(g, s.keyLimit.of(g.name))
	}
	return nil
}

func (s *Scheduler) setGateLimit(g *gate, limit int) {
	if g.limit == limit {
		return
	}
	if limit < int(g.running) {
		g.lowered = s.startSeq
	}
	g.limit = limit
	s.setClosed(g, g.shouldClose())
}
