package table

import (
	"hash/maphash"
	"math/bits"
)

// String is the hash of job ids and bucket signatures: seeded, so that ids
// chosen by clients cannot be made to collide without knowing the seed, and
// inline, which for the short strings of a scheduler costs a fraction of
// hash/maphash's calls (the core's BenchmarkCycle hashes two strings per
// job). The mixing is wyhash's multiply-and-fold, as the Go runtime uses
// where it has no AES instructions.
func String(s string, seed uint64) uint64 {
	h := seed ^ uint64(len(s))*0x9e3779b97f4a7c15
	n := len(s)
	switch {
	case n >= 8:
		for t := s; len(t) > 8; t = t[8:] {
			h = Mix(h^le64(t), 0xe7037ed1a0b428db)
		}
		h = Mix(h^le64(s[n-8:]), 0xa0761d6478bd642f) // the last 8 bytes
	case n >= 4:
		h = Mix(h^(uint64(le32(s))<<32|uint64(le32(s[n-4:]))), 0xa0761d6478bd642f)
	case n > 0:
		h = Mix(h^(uint64(s[0])<<16|uint64(s[n>>1])<<8|uint64(s[n-1])), 0xa0761d6478bd642f)
	}
	return Mix(h, 0x8ebc6af09c88c6e3)
}

// Mix folds the 128-bit product of a and b into 64 bits.
func Mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// le64 reads the first 8 bytes of s as a little-endian number.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// le32 reads the first 4 bytes of s as a little-endian number.
func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// NewSeed returns a random 64-bit hash seed.
func NewSeed() uint64 {
	var h maphash.Hash
	h.WriteString("usher")
	return h.Sum64()
}
