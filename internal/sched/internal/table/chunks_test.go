package table

import (
	"testing"
	"unsafe"
)

// Numbers are handed out in order, the most recently freed first, and a
// record's address stays the same as the table grows.
func TestChunksReuseTheLastFreedNumber(t *testing.T) {
	var c Chunks[[64]byte]
	first, p := c.New()
	for range 3 * ChunkLen {
		c.New()
	}
	if c.At(first) != p {
		t.Fatal("a record moved as the table grew")
	}
	c.Free(7)
	c.Free(1500)
	if n, _ := c.New(); n != 1500 {
		t.Fatalf("new number %d, want 1500, the last freed", n)
	}
	if c.Live() != 3*ChunkLen {
		t.Fatalf("%d live records, want %d", c.Live(), 3*ChunkLen)
	}
	seen := uint32(0)
	for n, r := range c.All() {
		if r != c.At(n) {
			t.Fatalf("All yields record %d at another address", n)
		}
		seen++
	}
	if seen != 4*ChunkLen { // 3·ChunkLen+1 numbers handed out: four chunks
		t.Fatalf("All yields %d records, want %d", seen, 4*ChunkLen)
	}
}

// A chunk starts on a cache line, so that records of whole cache lines
// never straddle two.
func TestChunksStartOnACacheLine(t *testing.T) {
	var c Chunks[[64]byte]
	for range 4 * ChunkLen {
		c.New()
	}
	for n := uint32(0); n < 4*ChunkLen; n += ChunkLen {
		if p := uintptr(unsafe.Pointer(c.At(n))); p%64 != 0 {
			t.Errorf("chunk of record %d starts at %#x", n, p)
		}
	}
}
