package sched

import (
	"iter"
	"unsafe"

	"github.com/usherhq/usher/internal/sched/internal/table"
)

// jobTable holds every live job's record and finds it by id.
//
// Records sit in a table.Chunks, so that a job's 32-bit slot names it
// everywhere else (lists, heaps, sets, links).
//
// The id index (a table.IDIndex of 8-byte entries) is written once per job
// and never on the job's way out: freeing a slot bumps the slot's
// generation, which turns every entry naming the slot's old generation
// stale. Stale entries are skipped by lookups and cleared by a sweep once
// live and stale entries fill three quarters of the table. So with a
// million queued jobs a submission costs one cache line of the index (the
// duplicate check, then the insertion into the same line) and a completion
// none: Complete finds a running job by the identity of its id string
// (runHints).
type jobTable struct {
	table.Chunks[job]
	gen   []uint8 // generation of each slot, as its record says, for sweeps
	exts  []*jobExt
	xfree []uint32 // free indexes in exts (0 is never used)
	index table.IDIndex
	seed  uint64
}

func newJobTable() jobTable {
	t := jobTable{seed: table.NewSeed(), exts: []*jobExt{nil}}
	t.index.Init(table.MinIDIndex)
	return t
}

// alloc returns a zeroed record (its slot set) not yet in the index.
func (t *jobTable) alloc() *job {
	slot, j := t.New()
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
	t.Free(slot)
	if t.index.Sparse() {
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

// hash returns the index hash of an id (see table.IDHash).
func (t *jobTable) hash(id string) uint64 { return table.IDHash(id, t.seed) }

// len returns the number of jobs in the index.
func (t *jobTable) len() int { return t.index.Live() }

// get returns the job with the id, or nil.
func (t *jobTable) get(id string) *job {
	if id == "" { // the id of every free record
		return nil
	}
	h := t.hash(id)
	return t.getFrom(id, h, t.index.Home(h))
}

// getFrom is get for a non-empty id that hashes to h, whose home entry e
// the caller loaded.
func (t *jobTable) getFrom(id string, h, e uint64) *job {
	x := &t.index
	tag := table.IDHashTag(h)
	i := x.Start(h)
	for d := 0; d <= table.MaxDist; d++ {
		if d > 0 {
			i = x.Next(i)
			e = x.At(i)
		}
		if e == 0 {
			return nil
		}
		if table.IDTag(e) == tag {
			if j := t.At(table.IDNum(e)); j.gen == table.IDGen(e) && j.id == id {
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
	if x.Crowded() {
		t.sweep(j)
	}
	for !x.Insert(h, j.slot, j.gen) {
		t.rebuild(2*x.Len(), j)
	}
	x.CountLive(1)
}

// remove takes a job out of the index: it no longer counts as live, and
// release, which frees its slot, makes its entry stale.
func (t *jobTable) remove(*job) { t.index.CountLive(-1) }

// sweep clears the stale entries of the index, then resizes it so that the
// live entries fill between an eighth and three eighths of it. j is the job
// being put, not in the index yet, or nil.
func (t *jobTable) sweep(j *job) {
	x := &t.index
	x.DropStale(t.gen)
	if n := x.Fit(); n != x.Len() {
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
	x.Init(n)
	for slot, j := range t.Chunks.All() {
		if j.id != "" && j != skip && !x.Insert(t.hash(j.id), slot, t.gen[slot]) {
			return false
		}
	}
	return true
}

// all yields every job in the index with its id, in no particular order.
func (t *jobTable) all() iter.Seq2[string, *job] {
	return func(yield func(string, *job) bool) {
		for _, j := range t.Chunks.All() {
			if j.id != "" && !yield(j.id, j) {
				return
			}
		}
	}
}

// runHints finds a running job by the identity of its id string (see
// table.AddrHints): a lookup checks that the slot hinted holds a running
// job whose id is this very string (equal address and length mean equal
// bytes, and live jobs have distinct ids), and anything else — an equal
// string from elsewhere, a hint overwritten by another start — goes
// through jobTable.get.
type runHints struct{ table.AddrHints }

func newRunHints() runHints { return runHints{table.NewAddrHints()} }

// get returns the running job whose id is this very string, or nil.
func (r *runHints) get(t *jobTable, id string) *job {
	if slot := r.Get(id); slot < t.Used() {
		if j := t.At(slot); j.state == stateRunning && len(j.id) == len(id) && unsafe.StringData(j.id) == unsafe.StringData(id) {
			return j
		}
	}
	return nil
}

// add notes a job that starts; running counts the running jobs.
func (r *runHints) add(j *job, running int) {
	r.Grow(running)
	r.Set(j.id, j.slot)
}
