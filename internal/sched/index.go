package sched

import (
	"hash/maphash"
	"iter"
	"unsafe"
)

// jobTable holds every live job's record and finds it by id.
//
// Records sit in fixed chunks of jobChunk, so that a *job stays valid while
// the table grows and a job's 32-bit slot names it everywhere else (heaps,
// sets, links). Freed slots are reused most recently freed first: their
// records are the likeliest to be in cache.
//
// The id index is an open-addressing table of 8-byte entries (see slotMap),
// half the size of a (hash, pointer) pair: with a million queued jobs an
// absent id, as Submit's duplicate check looks up, costs one cache line and
// touches no record. Complete looks a running job up first by the identity
// of its id string (runIndex), which reads neither the id's bytes nor the
// big table.
type jobTable struct {
	chunks [][]job
	used   uint32   // slots handed out at least once
	free   []uint32 // slots to reuse
	index  slotMap
	seed   maphash.Seed
}

// jobChunkBits sets the records per chunk (4096 records, 256 KiB).
const jobChunkBits = 12

const jobChunk = 1 << jobChunkBits

func newJobTable() jobTable {
	t := jobTable{seed: maphash.MakeSeed()}
	t.index.init(minIndexSlots)
	return t
}

// at returns the record in a slot.
func (t *jobTable) at(slot uint32) *job {
	return &t.chunks[slot>>jobChunkBits][slot&(jobChunk-1)]
}

// alloc returns a zeroed record (its slot set) not yet in the index.
func (t *jobTable) alloc() *job {
	var slot uint32
	if n := len(t.free); n > 0 {
		slot = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		slot = t.used
		t.used++
		if int(slot>>jobChunkBits) == len(t.chunks) {
			t.chunks = append(t.chunks, make([]job, jobChunk))
		}
	}
	j := t.at(slot)
	j.slot = slot
	return j
}

// release clears a record out of the index and frees its slot.
func (t *jobTable) release(j *job) {
	slot := j.slot
	*j = job{slot: slot}
	t.free = append(t.free, slot)
}

func (t *jobTable) hash(id string) uint64 { return maphash.String(t.seed, id) }

// len returns the number of jobs in the index.
func (t *jobTable) len() int { return t.index.n }

// get returns the job with the id, or nil.
func (t *jobTable) get(id string) *job {
	h := t.hash(id)
	m := &t.index
	tag := h >> tagShift
	for i := h & m.mask; ; i = (i + 1) & m.mask {
		e := m.e[i]
		if e == 0 {
			return nil
		}
		if (e>>32)&tagMask == tag {
			if j := t.at(uint32(e) - 1); j.hash == h && j.id == id {
				return j
			}
		}
	}
}

// put adds a job whose id is not in the index.
func (t *jobTable) put(j *job) {
	j.hash = t.hash(j.id)
	t.index.add(j.hash, j.slot, t.hashOf)
}

// remove deletes a job from the index.
func (t *jobTable) remove(j *job) { t.index.delete(j.hash, j.slot, t.hashOf) }

func (t *jobTable) hashOf(slot uint32) uint64 { return t.at(slot).hash }

// all yields every job in the index with its id, in no particular order.
func (t *jobTable) all() iter.Seq2[string, *job] {
	return func(yield func(string, *job) bool) {
		for _, e := range t.index.e {
			if e != 0 {
				j := t.at(uint32(e) - 1)
				if !yield(j.id, j) {
					return
				}
			}
		}
	}
}

// runIndex finds a running job by the identity of its id string: the
// address and length of its bytes. A driver that reports a completion with
// the JobID of the Assignment it was given passes that very string, so the
// lookup hashes two words instead of the id's bytes and reads no cold
// memory. Equal strings at other addresses are found through jobTable.get.
type runIndex struct {
	m slotMap
}

func newRunIndex() runIndex {
	r := runIndex{}
	r.m.init(minIndexSlots)
	return r
}

// identity hashes the address and length of a string's bytes.
func identity(id string) uint64 {
	x := uint64(uintptr(unsafe.Pointer(unsafe.StringData(id)))) ^ uint64(len(id))<<48
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

// get returns the slot of the running job whose id is this very string.
func (r *runIndex) get(t *jobTable, id string) (uint32, bool) {
	h := identity(id)
	m := &r.m
	tag := h >> tagShift
	for i := h & m.mask; ; i = (i + 1) & m.mask {
		e := m.e[i]
		if e == 0 {
			return 0, false
		}
		if (e>>32)&tagMask == tag {
			slot := uint32(e) - 1
			if jid := t.at(slot).id; len(jid) == len(id) && unsafe.StringData(jid) == unsafe.StringData(id) {
				return slot, true
			}
		}
	}
}

func (r *runIndex) add(t *jobTable, j *job) {
	r.m.add(identity(j.id), j.slot, func(s uint32) uint64 { return identity(t.at(s).id) })
}

func (r *runIndex) remove(t *jobTable, j *job) {
	r.m.delete(identity(j.id), j.slot, func(s uint32) uint64 { return identity(t.at(s).id) })
}

// slotMap maps 64-bit hashes to slots: open addressing with linear probing
// and backward-shift deletion, so that no tombstone slows later probes.
// An entry packs slot+1 (0 marks an empty entry) in its low 32 bits, 24
// further bits of the hash as a tag that rules out almost every wrong
// candidate without reading its record, and its distance from its home
// position in the top 8 bits, which deletion needs to shift entries back
// without rehashing them.
type slotMap struct {
	e    []uint64 // power-of-two length
	mask uint64
	n    int
}

const (
	minIndexSlots = 16
	tagShift      = 40
	tagMask       = 1<<24 - 1
	maxDist       = 255
)

func (m *slotMap) init(n int) {
	m.e = make([]uint64, n)
	m.mask = uint64(n - 1)
}

// add inserts a slot under hash h; hashOf gives the hash of any slot in
// the map, for growing.
func (m *slotMap) add(h uint64, slot uint32, hashOf func(uint32) uint64) {
	if 4*(m.n+1) > 3*len(m.e) {
		m.resize(2*len(m.e), hashOf)
	}
	for !m.insert(h, slot) {
		m.resize(2*len(m.e), hashOf)
	}
	m.n++
}

// insert places an entry; it fails when its probe would exceed maxDist.
func (m *slotMap) insert(h uint64, slot uint32) bool {
	i := h & m.mask
	for d := uint64(0); ; d++ {
		if d > maxDist {
			return false
		}
		if m.e[i] == 0 {
			m.e[i] = uint64(slot) + 1 | (h>>tagShift)<<32 | d<<56
			return true
		}
		i = (i + 1) & m.mask
	}
}

// delete removes the entry of slot under hash h, if present.
func (m *slotMap) delete(h uint64, slot uint32, hashOf func(uint32) uint64) {
	want := uint64(slot) + 1
	i := h & m.mask
	for {
		e := m.e[i]
		if e == 0 {
			return
		}
		if e&(1<<32-1) == want {
			break
		}
		i = (i + 1) & m.mask
	}
	for k := (i + 1) & m.mask; m.e[k] != 0; k = (k + 1) & m.mask {
		// Move entry k into the hole at i unless its home lies cyclically
		// in (i, k]: then it is already as close to home as it can be.
		e := m.e[k]
		gap := (k - i) & m.mask
		if d := e >> 56; d >= gap {
			m.e[i] = e&(1<<56-1) | (d-gap)<<56
			i = k
		}
	}
	m.e[i] = 0
	m.n--
	if len(m.e) > minIndexSlots && 8*m.n < len(m.e) {
		m.resize(len(m.e)/2, hashOf)
	}
}

func (m *slotMap) resize(n int, hashOf func(uint32) uint64) {
	old := m.e
	for {
		m.init(n)
		ok := true
		for _, e := range old {
			if e != 0 && !m.insert(hashOf(uint32(e)-1), uint32(e)-1) {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		n *= 2
	}
}
