package sched

import (
	"hash/maphash"
	"iter"
)

// jobIndex finds a live job by its id. It is an open-addressing hash table
// of (hash, job) pairs with linear probing and backward-shift deletion.
//
// It replaces a map[string]*job on the hot path: with a million queued jobs
// a Go map lookup reads the table header, the control word, the slot and the
// key's bytes, each a cache miss, while a probe here reads one 16-byte slot
// and compares full hashes, touching the job (which the caller needs next
// anyway) only on a hash match. A lookup for an absent id, as Submit's
// duplicate check does, touches no job at all (BenchmarkCycle).
type jobIndex struct {
	slots []indexSlot // power-of-two length; hash 0 marks an empty slot
	n     int
	seed  maphash.Seed
}

type indexSlot struct {
	hash uint64
	j    *job
}

const minIndexSlots = 16

func newJobIndex() jobIndex {
	return jobIndex{slots: make([]indexSlot, minIndexSlots), seed: maphash.MakeSeed()}
}

// hash never returns 0, the empty mark.
func (x *jobIndex) hash(id string) uint64 { return maphash.String(x.seed, id) | 1 }

// len returns the number of jobs.
func (x *jobIndex) len() int { return x.n }

// get returns the job with the id, or nil.
func (x *jobIndex) get(id string) *job {
	h := x.hash(id)
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &x.slots[i]
		if sl.hash == 0 {
			return nil
		}
		if sl.hash == h && sl.j.id == id {
			return sl.j
		}
	}
}

// put adds a job whose id is not in the index.
func (x *jobIndex) put(j *job) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.resize(2 * len(x.slots))
	}
	x.insert(x.hash(j.id), j)
	x.n++
}

func (x *jobIndex) insert(h uint64, j *job) {
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for x.slots[i].hash != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = indexSlot{h, j}
}

// remove deletes the job with the id, if present. The slots after it in
// its probe run shift back, so that no tombstone slows later probes.
func (x *jobIndex) remove(id string) {
	h := x.hash(id)
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for {
		sl := x.slots[i]
		if sl.hash == 0 {
			return
		}
		if sl.hash == h && sl.j.id == id {
			break
		}
		i = (i + 1) & mask
	}
	for k := (i + 1) & mask; x.slots[k].hash != 0; k = (k + 1) & mask {
		// Move slot k into the hole at i unless its home lies cyclically
		// in (i, k]: then it is already as close to home as it can be.
		home := x.slots[k].hash & mask
		if (k-home)&mask >= (k-i)&mask {
			x.slots[i] = x.slots[k]
			i = k
		}
	}
	x.slots[i] = indexSlot{}
	x.n--
	if len(x.slots) > minIndexSlots && 8*x.n < len(x.slots) {
		x.resize(len(x.slots) / 2)
	}
}

func (x *jobIndex) resize(n int) {
	old := x.slots
	x.slots = make([]indexSlot, n)
	for _, sl := range old {
		if sl.hash != 0 {
			x.insert(sl.hash, sl.j)
		}
	}
}

// all yields every job with its id, in no particular order.
func (x *jobIndex) all() iter.Seq2[string, *job] {
	return func(yield func(string, *job) bool) {
		for _, sl := range x.slots {
			if sl.hash != 0 && !yield(sl.j.id, sl.j) {
				return
			}
		}
	}
}
