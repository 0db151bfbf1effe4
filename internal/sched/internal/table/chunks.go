package table

import "iter"

// Chunks holds records of type T in fixed chunks, so that a *T stays valid
// while the table grows and a 32-bit number names a record everywhere
// else. Freed numbers are reused most recently freed first: their records
// are the likeliest to be in cache. A chunk is a pointer to an array, so
// that finding a record checks one bound, the chunk's, and none inside it.
// The zero Chunks is empty and ready to use.
type Chunks[T any] struct {
	chunks []*[ChunkLen]T
	used   uint32   // numbers handed out at least once
	free   []uint32 // numbers to reuse
}

// ChunkBits sets the records per chunk: 1024 (64 KiB of 64-byte records).
const ChunkBits = 10

// ChunkLen is the number of records in a chunk.
const ChunkLen = 1 << ChunkBits

// At returns the record numbered n, which New handed out.
func (t *Chunks[T]) At(n uint32) *T {
	return &t.chunks[n>>ChunkBits][n&(ChunkLen-1)]
}

// New returns a free number and its record, which holds whatever Free's
// caller left in it (records are never cleared here).
func (t *Chunks[T]) New() (uint32, *T) {
	k := len(t.free)
	if k == 0 {
		return t.grow()
	}
	n := t.free[k-1]
	t.free = t.free[:k-1]
	return n, t.At(n)
}

// grow is New when no number is free: the next never used one.
func (t *Chunks[T]) grow() (uint32, *T) {
	n := t.used
	t.used++
	if int(n>>ChunkBits) == len(t.chunks) {
		t.chunks = append(t.chunks, new([ChunkLen]T))
	}
	return n, t.At(n)
}

// Free makes number n free for reuse.
func (t *Chunks[T]) Free(n uint32) { t.free = append(t.free, n) }

// Live returns the number of records in use.
func (t *Chunks[T]) Live() int { return int(t.used) - len(t.free) }

// Used returns how many numbers were handed out at least once: every
// number below it names a record.
func (t *Chunks[T]) Used() uint32 { return t.used }

// All yields every record of every chunk with its number, used or not, in
// order of number.
func (t *Chunks[T]) All() iter.Seq2[uint32, *T] {
	return func(yield func(uint32, *T) bool) {
		for c, chunk := range t.chunks {
			for i := range chunk {
				if !yield(uint32(c<<ChunkBits+i), &chunk[i]) {
					return
				}
			}
		}
	}
}

// FreeList returns the numbers free for reuse, the next one last; the
// caller must not change it.
func (t *Chunks[T]) FreeList() []uint32 { return t.free }
