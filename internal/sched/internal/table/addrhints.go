package table

import "unsafe"

// AddrHints finds a record number by the identity of a string: the address
// of its bytes (the hint's position depends on the address alone). The
// core keeps one for running jobs: a driver that reports a completion with
// the JobID of the Assignment it was given passes that very string, so the
// lookup hashes one word instead of the id's bytes and reads no cold
// memory. A hint is written when a job starts and never erased, so it is
// only a hint: the caller checks that the record it names is a running job
// whose id is this very string (equal address and length mean equal
// bytes), and anything else goes through the id index.
type AddrHints struct {
	slot  []uint32 // power-of-two length
	shift uint     // 64 - log2(len(slot))
}

// minHints is the smallest hint table; it grows to 16 entries per running
// record, so that few hints are overwritten while their record runs.
const minHints = 64

// NewAddrHints returns an empty hint table.
func NewAddrHints() AddrHints { return AddrHints{slot: make([]uint32, minHints), shift: 64 - 6} }

// at returns the hint of a string with the address of s's bytes.
func (r *AddrHints) at(s string) *uint32 {
	p := uint64(uintptr(unsafe.Pointer(unsafe.StringData(s))))
	return &r.slot[(p*0x9e3779b97f4a7c15)>>(r.shift&63)]
}

// Get returns the number last hinted for a string with the address of s's
// bytes; it may name anything, or nothing (0 or a number never handed out).
// It repeats at rather than calling it, which keeps it cheap enough for
// its callers to inline it (the core's Complete does).
func (r *AddrHints) Get(s string) uint32 {
	p := uint64(uintptr(unsafe.Pointer(unsafe.StringData(s))))
	return r.slot[(p*0x9e3779b97f4a7c15)>>(r.shift&63)]
}

// Grow makes room for running records that may be looked up: 16 hints
// for each. Hints made before it grows are lost, and lookups fall back.
func (r *AddrHints) Grow(running int) {
	if 16*running > len(r.slot) {
		r.slot = make([]uint32, 2*len(r.slot))
		r.shift--
	}
}

// Set hints number n for s.
func (r *AddrHints) Set(s string, n uint32) { *r.at(s) = n }
