package sched

import (
	"iter"
	"unsafe"
)

// jobTable holds every live job's record and finds it by id.
//
// Records sit in a chunkTable, so that a job's 32-bit slot names it
// everywhere else (lists, heaps, sets, links).
//
// The id index (an open-addressing table of 8-byte entries) is written
// once per job and never on the job's way out: freeing a slot bumps the
// slot's generation, which turns every entry naming the slot's old
// generation stale. Stale entries are skipped by lookups and cleared by a
// sweep once live and stale entries fill three quarters of the table. So
// with a million queued jobs a submission costs one cache line of the
// index (the duplicate check, then the insertion into the same line) and a
// completion none: Complete finds a running job by the identity of its id
// string (runHints).
type jobTable struct {
	chunkTable[job]
	gen   []uint8 // generation of each slot, as its record says, for sweeps
	exts  []*jobExt
	xfree []uint32 // free indexes in exts (0 is never used)
	index jobIndex
	seed  uint64
}

func newJobTable() jobTable {
	t := jobTable{seed: newSeed(), exts: []*jobExt{nil}}
	t.index.init(minIndexSlots)
	return t
}

// alloc returns a zeroed record (its slot set) not yet in the index.
func (t *jobTable) alloc() *job {
	slot, j := t.newRecord()
	if int(slot) == len(t.gen) {
		t.gen = append(t.gen, 0)
	}
	j.slot = slot
	return j
}

// release clears a record, drops its rare parts and frees its slot; its
// index entry goes stale.
func (t *jobTable) release(j *job) {
	slot := j.slot
	if j.ext != 0 {
		t.exts[j.ext] = nil
		t.xfree = append(t.xfree, j.ext)
	}
	gen := j.gen + 1
	*j = job{slot: slot, gen: gen}
	t.gen[slot] = gen // a store: the record, read when the job ended, knew it
	t.freeRecord(slot)
	if x := &t.index; len(x.e) > minIndexSlots && 16*x.live < len(x.e) {
		t.sweep(nil) // shrinks
	}
}

// ext returns a job's rare parts, or nil.
func (t *jobTable) ext(j *job) *jobExt {
	if j.ext == 0 {
		return nil
	}
	return t.exts[j.ext]
}

// addExt returns a job's rare parts, creating them.
func (t *jobTable) addExt(j *job) *jobExt {
	if j.ext != 0 {
		return t.exts[j.ext]
	}
	x := &jobExt{}
	if n := len(t.xfree); n > 0 {
		j.ext = t.xfree[n-1]
		t.xfree = t.xfree[:n-1]
		t.exts[j.ext] = x
	} else {
		j.ext = uint32(len(t.exts))
		t.exts = append(t.exts, x)
	}
	return x
}

// hash returns the index hash of an id: its low groupBits bits pick the
// entry within a group, the bits above them the group, and the top 16
// bits are the entry's tag.
//
// Ids that differ in their last byte alone share their group: the group
// comes from the hash of every byte but the last, and the last byte, offset
// by that hash, picks the entry within it. A driver numbering its jobs
// ("asy-1230", "asy-1231", …) thus submits ten jobs in a row into
// neighbouring entries of one group, two cache lines, instead of ten
// random lines of a table far larger than any cache. A group holds
// groupSize entries, more than the 62 digits and letters an id may end in,
// so ids that differ only in a last digit or letter never collide, and a
// collision probes the same entry of the next group: each of the groupSize
// columns is a table of its own (linear probing in steps of a group), whose
// runs are no longer than a plain table's. The tag mixes the last byte in,
// so that the ids of a group are told apart without reading their records.
func (t *jobTable) hash(id string) uint64 {
	n := len(id)
	if n == 0 { // never indexed; hashed all the same
		return strHash(id, t.seed)
	}
	h := strHash(id[:n-1], t.seed)
	last := uint64(id[n-1])
	col := uint64(lastByteColumn[last]) + h>>(64-groupBits)
	return (h<<groupBits | col&(groupSize-1)) ^ (last*0x9e37)<<jobTagShift
}

// lastByteColumn numbers the bytes ids end in, before the hash's offset:
// digits, upper and lower case letters get distinct columns (0–9, 10–35,
// 36–61), so that the 62 ids of an alphanumeric counter's next-to-last
// digit share a group without sharing an entry; any other byte gets its
// low six bits.
var lastByteColumn = func() (t [256]uint8) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = uint8(c - '0')
		case 'A' <= c && c <= 'Z':
			t[c] = uint8(c - 'A' + 10)
		case 'a' <= c && c <= 'z':
			t[c] = uint8(c - 'a' + 36)
		default:
			t[c] = uint8(c & 63)
		}
	}
	return t
}()

// len returns the number of jobs in the index.
func (t *jobTable) len() int { return t.index.live }

// get returns the job with the id, or nil.
func (t *jobTable) get(id string) *job {
	if id == "" { // the id of every free record
		return nil
	}
	h := t.hash(id)
	return t.getFrom(id, h, t.index.home(h))
}

// getFrom is get for a non-empty id that hashes to h, whose home entry e
// the caller loaded.
func (t *jobTable) getFrom(id string, h, e uint64) *job {
	x := &t.index
	tag := h >> jobTagShift
	i := h & x.mask
	for d := 0; d <= maxDist; d++ {
		if d > 0 {
			i = (i + groupSize) & x.mask
			e = x.e[i]
		}
		if e == 0 {
			return nil
		}
		if (e>>32)&0xffff == tag {
			if j := t.at(uint32(e) - 1); j.gen == uint8(e>>48) && j.id == id {
				return j
			}
		}
	}
	return nil // a full column: insert places nothing further from home
}

// put adds a job whose id, which hashes to h, is not in the index. Live
// entries never fill more than three eighths of the index: it grows as soon
// as they would, rather than at the next sweep, so that a queue that has
// just grown is not probed at twice the load of one that grew long ago.
func (t *jobTable) put(j *job, h uint64) {
	x := &t.index
	if 4*(x.used+1) > 3*len(x.e) || 8*(x.live+1) > 3*len(x.e) {
		t.sweep(j)
	}
	for !x.insert(h, j.slot, j.gen) {
		t.rebuild(2*len(x.e), j)
	}
	x.live++
}

// remove takes a job out of the index: it no longer counts as live, and
// release, which frees its slot, makes its entry stale.
func (t *jobTable) remove(*job) { t.index.live-- }

// sweep clears the stale entries of the index, then resizes it so that the
// live entries fill between an eighth and three eighths of it. j is the job
// being put, not in the index yet, or nil.
func (t *jobTable) sweep(j *job) {
	x := &t.index
	for i := uint64(0); i < uint64(len(x.e)); {
		e := x.e[i]
		if e != 0 && uint8(e>>48) != t.gen[uint32(e)-1] {
			x.deleteAt(i)
			continue
		}
		i++
	}
	n := len(x.e)
	for 8*(x.live+1) > 3*n {
		n *= 2
	}
	for n > minIndexSlots && 8*(x.live+1) < n {
		n /= 2
	}
	if n != len(x.e) {
		t.rebuild(n, j)
	}
}

// rebuild makes a new index of at least n entries from the records, whose
// ids it hashes again; skip is not in the index yet.
func (t *jobTable) rebuild(n int, skip *job) {
	for !t.refill(n, skip) {
		n *= 2
	}
}

func (t *jobTable) refill(n int, skip *job) bool {
	x := &t.index
	x.init(n)
	for c, chunk := range t.chunks {
		for i := range chunk {
			j := &chunk[i]
			if slot := uint32(c<<chunkBits + i); j.id != "" && j != skip && !x.insert(t.hash(j.id), slot, t.gen[slot]) {
				return false
			}
		}
	}
	return true
}

// all yields every job in the index with its id, in no particular order.
func (t *jobTable) all() iter.Seq2[string, *job] {
	return func(yield func(string, *job) bool) {
		for _, chunk := range t.chunks {
			for i := range chunk {
				if j := &chunk[i]; j.id != "" && !yield(j.id, j) {
					return
				}
			}
		}
	}
}

// jobIndex is the id index of jobTable: open addressing over groups of
// groupSize entries, where an entry that finds its home taken goes to the
// same place in the next group (jobTable.hash says why). An entry packs
// slot+1 (0 marks an empty entry) in its low 32 bits, then 16 bits of the
// id's hash as a tag that rules out almost every wrong candidate without
// reading its record, the slot's generation when the entry was made, and
// the entry's distance from its home position in groups, which lets a
// sweep shift entries back without hashing them again.
type jobIndex struct {
	e    []uint64 // power-of-two length
	mask uint64
	used int // live and stale entries
	live int
}

const (
	minIndexSlots = 4 * groupSize
	minMapSlots   = 16
	jobTagShift   = 48
	groupBits     = 6
	groupSize     = 1 << groupBits
)

// home returns the entry at the home position of hash h.
func (x *jobIndex) home(h uint64) uint64 { return x.e[h&x.mask] }

// group returns the group of index position i.
func (x *jobIndex) group(i uint64) uint64 { return i >> groupBits }

func (x *jobIndex) init(n int) {
	x.e = make([]uint64, n)
	x.mask = uint64(n - 1)
	x.used = 0
}

// insert places an entry at the first empty position of its column from
// its home. It fails when the distance would not fit its 8 bits (or the
// column is full); the table then grows.
func (x *jobIndex) insert(h uint64, slot uint32, gen uint8) bool {
	i := h & x.mask
	for d := uint64(0); ; d++ {
		if d > maxDist {
			return false
		}
		if x.e[i] == 0 {
			x.e[i] = uint64(slot) + 1 | (h>>jobTagShift)<<32 | uint64(gen)<<48 | d<<56
			x.used++
			return true
		}
		i = (i + groupSize) & x.mask
	}
}

// deleteAt removes the entry at i, shifting later entries of its column's
// run back.
func (x *jobIndex) deleteAt(i uint64) {
	for k := (i + groupSize) & x.mask; x.e[k] != 0 && k != i; k = (k + groupSize) & x.mask {
		// Move entry k into the hole at i unless its home lies cyclically
		// in (i, k]: then it is already as close to home as it can be.
		e := x.e[k]
		gap := ((k - i) & x.mask) >> groupBits
		if d := e >> 56; d >= gap {
			x.e[i] = e&(1<<56-1) | (d-gap)<<56
			i = k
		}
	}
	x.e[i] = 0
	x.used--
}

// runHints finds a running job by the identity of its id string: the
// address and length of its bytes (the hint's position depends on the
// address alone). A driver that reports a completion with the JobID of the
// Assignment it was given passes that very string, so the lookup hashes
// one word instead of the id's bytes and reads no cold memory. A hint is written when a job starts and never erased: a lookup
// checks that the slot it names holds a running job whose id is this very
// string (equal address and length mean equal bytes, and live jobs have
// distinct ids), and anything else — an equal string from elsewhere, a
// hint overwritten by another start — goes through jobTable.get.
type runHints struct {
	slot  []uint32 // power-of-two length
	shift uint     // 64 - log2(len(slot))
}

// minHints is the smallest hint table; it grows to 16 entries per running
// job, so that few hints are overwritten while their job runs.
const minHints = 64

func newRunHints() runHints { return runHints{slot: make([]uint32, minHints), shift: 64 - 6} }

func (r *runHints) at(id string) *uint32 {
	p := uint64(uintptr(unsafe.Pointer(unsafe.StringData(id))))
	return &r.slot[(p*0x9e3779b97f4a7c15)>>(r.shift&63)]
}

// get returns the running job whose id is this very string, or nil.
func (r *runHints) get(t *jobTable, id string) *job {
	slot := *r.at(id)
	if slot >= t.used {
		return nil
	}
	j := t.at(slot)
	if j.state != stateRunning || len(j.id) != len(id) || unsafe.StringData(j.id) != unsafe.StringData(id) {
		return nil
	}
	return j
}

// add notes a job that starts; running counts the running jobs.
func (r *runHints) add(j *job, running int) {
	if 16*running > len(r.slot) {
		r.slot = make([]uint32, 2*len(r.slot)) // old hints are lost: lookups fall back
		r.shift--
	}
	*r.at(j.id) = j.slot
}

// slotMap maps 64-bit hashes to 32-bit numbers (bucket numbers): open
// addressing with linear probing and backward-shift deletion, so that no
// tombstone slows later probes. An entry packs the
// number+1 (0 marks an empty entry) in its low 32 bits, 24 further bits of
// the hash as a tag that rules out almost every wrong candidate without
// reading what the number names, and its distance from its home position
// in the top 8 bits, which deletion needs to shift entries back without
// hashing them again.
type slotMap struct {
	e    []uint64 // power-of-two length
	mask uint64
	n    int
}

const (
	tagShift = 40
	tagMask  = 1<<24 - 1
	maxDist  = 255
)

// home returns the entry at the home position of hash h.
func (m *slotMap) home(h uint64) uint64 { return m.e[h&m.mask] }

func (m *slotMap) init(n int) {
	m.e = make([]uint64, n)
	m.mask = uint64(n - 1)
}

// add inserts a number under hash h; hashOf gives the hash of any number
// in the map, for growing.
func (m *slotMap) add(h uint64, n uint32, hashOf func(uint32) uint64) {
	if 4*(m.n+1) > 3*len(m.e) {
		m.resize(2*len(m.e), hashOf)
	}
	for !m.insert(h, n) {
		m.resize(2*len(m.e), hashOf)
	}
	m.n++
}

// insert places an entry; it fails when its probe would exceed maxDist.
func (m *slotMap) insert(h uint64, n uint32) bool {
	i := h & m.mask
	for d := uint64(0); ; d++ {
		if d > maxDist {
			return false
		}
		if m.e[i] == 0 {
			m.e[i] = uint64(n) + 1 | (h>>tagShift)<<32 | d<<56
			return true
		}
		i = (i + 1) & m.mask
	}
}

// delete removes the entry of number n under hash h, if present.
func (m *slotMap) delete(h uint64, n uint32, hashOf func(uint32) uint64) {
	want := uint64(n) + 1
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
		e := m.e[k]
		gap := (k - i) & m.mask
		if d := e >> 56; d >= gap {
			m.e[i] = e&(1<<56-1) | (d-gap)<<56
			i = k
		}
	}
	m.e[i] = 0
	m.n--
	if len(m.e) > minMapSlots && 8*m.n < len(m.e) {
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
