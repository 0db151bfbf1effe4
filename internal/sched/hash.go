package sched

import (
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// strHash is the hash of job ids and bucket signatures: seeded, so that ids
// chosen by clients cannot be made to collide without knowing the seed, and
// inline, which for the short strings of a scheduler costs a fraction of
// hash/maphash's calls (BenchmarkCycle hashes two strings per job). The
// mixing is wyhash's multiply-and-fold, as the Go runtime uses where it has
// no AES instructions.
func strHash(s string, seed uint64) uint64 {
	h := seed ^ uint64(len(s))*0x9e3779b97f4a7c15
	n := len(s)
	switch {
	case n >= 8:
		for t := s; len(t) > 8; t = t[8:] {
			h = mum(h^le64(t), 0xe7037ed1a0b428db)
		}
		h = mum(h^le64(s[n-8:]), 0xa0761d6478bd642f) // the last 8 bytes
	case n >= 4:
		h = mum(h^(uint64(le32(s))<<32|uint64(le32(s[n-4:]))), 0xa0761d6478bd642f)
	case n > 0:
		h = mum(h^(uint64(s[0])<<16|uint64(s[n>>1])<<8|uint64(s[n-1])), 0xa0761d6478bd642f)
	}
	return mum(h, 0x8ebc6af09c88c6e3)
}

// mum folds the 128-bit product of a and b.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// newSeed returns a random 64-bit hash seed.
func newSeed() uint64 {
	var h maphash.Hash
	h.WriteString("usher")
	return h.Sum64()
}

// nameCache remembers a few name lookups of a small map (queues, workers)
// in front of it: a Go map hashes a string key through an indirect call,
// several times the cost of the two compares a hit here takes. Entries are
// checked against the name, so a collision only costs a miss; whoever
// changes the map clears the cache.
//
// A driver usually passes the very same string each time (a constant, a
// configured name), so the cache is tried first by the identity of the
// name's bytes, which reads none of them, then by their content. An
// identity entry holds the string itself, so its bytes cannot be freed and
// their address reused for other bytes while it is cached.
type nameCache[T any] struct {
	names  [nameSlots]string
	vals   [nameSlots]*T
	idents [nameSlots]identEntry[T]
}

type identEntry[T any] struct {
	name string
	val  *T
}

const nameSlots = 16

func nameSlot(name string) int {
	n := len(name)
	x := uint64(n)
	if n >= 4 {
		x ^= uint64(le32(name)) ^ uint64(le32(name[n-4:]))<<24
	} else if n > 0 {
		x ^= uint64(name[0])<<8 ^ uint64(name[n-1])<<16
	}
	return int((x * 0x9e3779b97f4a7c15) >> 60)
}

// identSlot places a name by the address of its bytes.
func identSlot(name string) int {
	return int((uint64(uintptr(unsafe.Pointer(unsafe.StringData(name)))) * 0x9e3779b97f4a7c15) >> 60)
}

// get returns the cached value for name, or nil.
func (c *nameCache[T]) get(name string) *T {
	e := &c.idents[identSlot(name)]
	if len(e.name) == len(name) && unsafe.StringData(e.name) == unsafe.StringData(name) && e.val != nil {
		return e.val
	}
	return c.getByContent(name)
}

func (c *nameCache[T]) getByContent(name string) *T {
	i := nameSlot(name)
	if v := c.vals[i]; v != nil && c.names[i] == name {
		c.idents[identSlot(name)] = identEntry[T]{name, v}
		return v
	}
	return nil
}

func (c *nameCache[T]) put(name string, v *T) {
	i := nameSlot(name)
	c.names[i], c.vals[i] = name, v
	c.idents[identSlot(name)] = identEntry[T]{name, v}
}

func (c *nameCache[T]) clear() { *c = nameCache[T]{} }
