package sched

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/usherhq/usher/internal/sched/internal/table"
)

// Queued jobs with the same queue, gates (keys, group, mode), tier and — in
// FIFO and random queues — priority share a bucket (see gates.go). A bucket holds its
// queued jobs in the form its queue's order needs:
//
//   - FIFO: a list in sort-key order threaded through the job records
//     (job.next, job.pos as the previous slot, job.nextKey), so that
//     appending a job writes to the last record without reading it, and
//     taking the first out reads only that record, which says the key of
//     the new first. Jobs arrive in key order: priority is part of a FIFO
//     bucket's identity, ready sequence numbers only grow, and re-filing a
//     queue enqueues its jobs sorted.
//   - random: a set of slots, for the random pick of a job within the
//     bucket (the second draw of a random pick); the bucket's level (see
//     randlevels.go) holds it while the bucket is visible.
//     (docs/design.md, "Per-key limits, priorities and random picks")
//   - strict: nothing; the queue keeps one heap of all its jobs.
//
// Buckets are 128-byte records in a bucketTable, named by 32-bit numbers
// in the ready index and found by a hash of their identity. The first cache
// line holds what a submission reads (the identity, the counts, the list
// ends); the second what starting and ending a job read (the gates, the
// first one inline) and the random set.
type bucket struct {
	refs    int32  // live jobs (any state) in the bucket
	queued  int32  // of them, ready in the queue
	pos     int32  // leaf in queue.tree[tier] or index in lvl.set; -1 when not there
	closed  int32  // closed gates, and one more while parked (rate.go)
	head    uint32 // FIFO list: first and last job's slots, or noSlot
	tail    uint32
	headKey uint64
	queue   *queue
	sig     string
	gate0   uint32 // number+1 of the counters of the first gate; 0: none
	prio    int16  // FIFO and random queues: the jobs' priority; else 0
	tier    int8
	flags   uint8
	// Second cache line.
	gates []gateRef  // every gate the bucket holds
	set   slotSet    // random queues, while not visible (see bucketSet)
	num   uint32     // the bucket's number in its table
	qpos  int32      // index in queue.buckets
	lvl   *randLevel // random queues: the level of the bucket's tier and priority
}

// Bucket flags.
const (
	manyGates  uint8 = 1 << iota // more than one gate
	listed                       // in Scheduler.idleList
	ratedGates                   // a key gate with a rate (rate.go)
	parked                       // hidden until a key's next token (rate.go)
)

// gateRef is a gate a bucket holds and the bucket's index in gate.buckets.
type gateRef struct {
	g   *gate
	pos int32
}

// bucketTable holds the buckets of every queue in a table.Chunks and finds
// one by its identity.
type bucketTable struct {
	table.Chunks[bucket]
	find table.SlotMap
	seed uint64
}

func newBucketTable() bucketTable {
	t := bucketTable{seed: table.NewSeed()}
	t.find.Init(table.MinSlotMap)
	return t
}

// hash mixes a bucket's identity into 64 bits.
func (t *bucketTable) hash(q *queue, sig string, tier int8, prio int16) uint64 {
	return table.Mix(table.String(sig, t.seed)^uint64(q.num)<<32^uint64(uint8(tier))<<16^uint64(uint16(prio)), 0x589965cc75374cc3)
}

func (t *bucketTable) hashOf(n uint32) uint64 {
	b := t.At(n)
	return t.hash(b.queue, b.sig, b.tier, b.prio)
}

// lookup returns the bucket with this identity, or nil.
func (t *bucketTable) lookup(q *queue, sig string, tier int8, prio int16) *bucket {
	h := t.hash(q, sig, tier, prio)
	return t.lookupFrom(q, sig, tier, prio, h, t.find.Home(h))
}

// lookupFrom is lookup for an identity that hashes to h, whose home entry e
// the caller loaded.
func (t *bucketTable) lookupFrom(q *queue, sig string, tier int8, prio int16, h, e uint64) *bucket {
	m := &t.find
	tag := table.HashTag(h)
	home := m.Start(h)
	for i := home; ; i = m.Next(i) {
		if i != home {
			e = m.At(i)
		}
		if e == 0 {
			return nil
		}
		if table.SlotTag(e) == tag {
			if b := t.At(table.SlotNum(e)); b.queue == q && b.tier == tier && b.prio == prio && sameString(b.sig, sig) {
				return b
			}
		}
	}
}

// add returns a new empty bucket with this identity.
func (t *bucketTable) add(q *queue, sig string, tier int8, prio int16) *bucket {
	n, b := t.New()
	*b = bucket{num: n, pos: -1, head: noSlot, tail: noSlot, queue: q, sig: sig, tier: tier, prio: prio}
	t.find.Add(t.hash(q, sig, tier, prio), n, t.hashOf)
	return b
}

// drop forgets a bucket and frees its number.
func (t *bucketTable) drop(b *bucket) {
	t.find.Delete(t.hash(b.queue, b.sig, b.tier, b.prio), b.num, t.hashOf)
	n := b.num
	*b = bucket{num: n}
	t.Free(n)
}

// sameString is a == b that answers equal strings sharing their bytes (a
// driver's key, kept as a lone key's signature) without a call.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
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

// bucketPrio is the priority part of a bucket's identity: FIFO queues
// keep one list per priority and random queues one level per priority;
// strict queues do not split by it.
func bucketPrio(q *queue, prio int16) int16 {
	if q.spec.Order == OrderStrict {
		return 0
	}
	return prio
}

// bucketFor returns the bucket of a job of queue q with these gates, tier
// and priority, creating it.
func (s *Scheduler) bucketFor(q *queue, keys []string, group string, mode Mode, tier int8, prio int16) *bucket {
	keys = dedupe(keys)
	sig := signature(keys, group, mode)
	prio = bucketPrio(q, prio)
	if b := s.bkts.lookup(q, sig, tier, prio); b != nil {
		return b
	}
	b := s.newBucket(q, sig, tier, prio)
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
	return b
}

// bucketLike returns the bucket with the gates and tier of b and priority
// prio, creating it.
func (s *Scheduler) bucketLike(b *bucket, prio int16) *bucket {
	q := b.queue
	prio = bucketPrio(q, prio)
	if nb := s.bkts.lookup(q, b.sig, b.tier, prio); nb != nil {
		return nb
	}
	nb := s.newBucket(q, b.sig, b.tier, prio)
	for _, r := range b.gates {
		s.attach(nb, r.g)
	}
	return nb
}

func (s *Scheduler) newBucket(q *queue, sig string, tier int8, prio int16) *bucket {
	b := s.bkts.add(q, sig, tier, prio)
	b.qpos = int32(len(q.buckets))
	q.buckets = append(q.buckets, b)
	if q.spec.Order == OrderRandom {
		b.lvl = q.levelFor(tier, prio)
	}
	s.nbuckets++
	s.idleBuckets++ // until refBucket counts its first job
	return b
}

func (s *Scheduler) attach(b *bucket, g *gate) {
	if len(b.gates) == 0 {
		b.gate0 = g.num + 1
	} else {
		b.flags |= manyGates
	}
	b.gates = append(b.gates, gateRef{g, int32(len(g.buckets))})
	g.buckets = append(g.buckets, b)
	if g.closed {
		b.closed++
	}
	if g.rated {
		b.flags |= ratedGates
	}
}

// refBucket counts a new live job of the bucket.
func (s *Scheduler) refBucket(b *bucket) {
	if b.refs == 0 {
		s.idleBuckets--
		s.countLive(b, 1)
	}
	b.refs++
}

// countLive adds d to the live buckets of every gate of bucket b. A bucket
// with one gate finds its counters from its first cache line (gate0), as
// hold does, rather than through its gates and the gate.
func (s *Scheduler) countLive(b *bucket, d int32) {
	if b.flags&manyGates == 0 {
		if b.gate0 != 0 {
			s.gcs.At(b.gate0 - 1).live += d
		}
		return
	}
	for _, r := range b.gates {
		r.g.live += d
	}
}

// releaseBucket drops a job's reference. A bucket left without jobs stays
// for reuse until a sweep, which runs once there are more than
// maxIdleBuckets idle buckets and more idle than live ones (the per-key
// counts drop their zero entries once in a while), so that a key that
// empties and fills again costs no allocation.
func (s *Scheduler) releaseBucket(b *bucket) {
	b.refs--
	if b.refs > 0 {
		return
	}
	s.countLive(b, -1)
	s.idleBuckets++
	if b.flags&listed == 0 {
		b.flags |= listed
		s.idleList = append(s.idleList, b)
	}
	if s.idleBuckets > maxIdleBuckets && 2*s.idleBuckets > s.nbuckets {
		s.sweepBuckets()
	}
}

// sweepBuckets removes every idle bucket, in the order they became idle.
// An entry of idleList may name a bucket dropped since (its queue was
// removed), whose record may hold a newer bucket: a live one is kept, an
// idle one is dropped all the same.
func (s *Scheduler) sweepBuckets() {
	for _, b := range s.idleList {
		b.flags &^= listed
		if b.queue != nil && b.refs == 0 {
			s.dropBucket(b)
		}
	}
	clear(s.idleList)
	s.idleList = s.idleList[:0]
	s.idleBuckets = 0
	s.pruneRateMemo()
}

// dropBucket removes an idle bucket and any key or group gate no bucket
// holds any more.
func (s *Scheduler) dropBucket(b *bucket) {
	s.nbuckets--
	s.idleBuckets--
	q := b.queue
	last := len(q.buckets) - 1
	if int(b.qpos) != last {
		q.buckets[b.qpos] = q.buckets[last]
		q.buckets[b.qpos].qpos = b.qpos
	}
	q.buckets[last] = nil
	q.buckets = q.buckets[:last]
	if b.lvl != nil {
		q.releaseLevel(b)
	}
	s.unparkDropped(b)
	for _, r := range b.gates {
		s.detachGate(b, r)
	}
	s.bkts.drop(b)
}

// detachGate takes bucket b out of the list of gate r.g, and drops the gate
// when no bucket holds it and nothing runs under it.
func (s *Scheduler) detachGate(b *bucket, r gateRef) {
	g, pos := r.g, r.pos
	last := len(g.buckets) - 1
	if int(pos) != last {
		moved := g.buckets[last]
		g.buckets[pos] = moved
		i := slices.IndexFunc(moved.gates, func(x gateRef) bool { return x.g == g })
		moved.gates[i].pos = pos
	}
	g.buckets[last] = nil
	g.buckets = g.buckets[:last]
	if len(g.buckets) == 0 && g.running == 0 {
		switch g.kind {
		case gateKey:
			s.dropRate(g)
			delete(s.keyGates, g.name)
			s.gcs.drop(g)
		case gateGroup:
			delete(s.groups, g.name)
			s.gcs.drop(g)
		}
	}
}

// visible says whether the bucket has ready jobs for its queue's ready
// index and no closed gate, and is not parked.
func (b *bucket) visible() bool {
	return b.closed == 0 && b.queued > 0 && b.queue.spec.Order != OrderStrict
}

// listPush appends a job to a FIFO bucket's list, writing to the last
// record without reading it.
func (s *Scheduler) listPush(b *bucket, j *job) {
	j.pos, j.next = int32(b.tail), noSlot
	if b.tail == noSlot {
		b.head, b.headKey = j.slot, j.key
	} else {
		last := s.jobs.At(b.tail)
		last.next, last.nextKey = j.slot, j.key
	}
	b.tail = j.slot
}

// listRemove takes a job out of its FIFO bucket's list. The first job's pos
// is never read, so taking it out writes nothing to the next record.
func (s *Scheduler) listRemove(b *bucket, j *job) {
	t := &s.jobs
	prev := uint32(j.pos)
	if b.head == j.slot {
		b.head, b.headKey = j.next, j.nextKey
		if j.next == noSlot {
			b.tail = noSlot
		}
	} else {
		p := t.At(prev)
		p.next, p.nextKey = j.next, j.nextKey
		if j.next == noSlot {
			b.tail = prev
		} else {
			t.At(j.next).pos = j.pos
		}
	}
	j.pos, j.next, j.nextKey = -1, 0, 0
}
