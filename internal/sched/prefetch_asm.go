//go:build amd64 || arm64

package sched

import "unsafe"

// prefetch starts fetching the cache line at p (PREFETCHT0 on amd64, PRFM
// PLDL1KEEP on arm64). It never faults, whatever p is.
//
//go:noescape
func prefetch(p unsafe.Pointer)
