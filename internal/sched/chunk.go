package sched

// chunkTable holds records of type T in fixed chunks, so that a *T stays
// valid while the table grows and a 32-bit number names a record
// everywhere else. Jobs, buckets and gate counters each live in one. Freed
// numbers are reused most recently freed first: their records are the
// likeliest to be in cache. A chunk is a pointer to an array, so that
// finding a record checks one bound, the chunk's, and none inside it.
type chunkTable[T any] struct {
	chunks []*[chunkLen]T
	used   uint32   // numbers handed out at least once
	free   []uint32 // numbers to reuse
}

// chunkBits sets the records per chunk: 1024 (64 KiB of jobs, 128 KiB of
// buckets, 32 KiB of gate counters).
const chunkBits = 10

const chunkLen = 1 << chunkBits

// at returns the record numbered n.
func (t *chunkTable[T]) at(n uint32) *T {
	return &t.chunks[n>>chunkBits][n&(chunkLen-1)]
}

// newRecord returns a free number and its record, which holds whatever
// freeRecord's caller left in it (records are never cleared here).
func (t *chunkTable[T]) newRecord() (uint32, *T) {
	k := len(t.free)
	if k == 0 {
		return t.grow()
	}
	n := t.free[k-1]
	t.free = t.free[:k-1]
	return n, t.at(n)
}

// grow is newRecord when no number is free: the next never used one.
func (t *chunkTable[T]) grow() (uint32, *T) {
	n := t.used
	t.used++
	if int(n>>chunkBits) == len(t.chunks) {
		t.chunks = append(t.chunks, new([chunkLen]T))
	}
	return n, t.at(n)
}

// freeRecord makes number n free for reuse.
func (t *chunkTable[T]) freeRecord(n uint32) { t.free = append(t.free, n) }

// live returns the number of records in use.
func (t *chunkTable[T]) live() int { return int(t.used) - len(t.free) }
