//go:build amd64 || arm64

package sched

import "unsafe"

// prefetchLines starts fetching the cache lines of the n bytes at p (at
// least one line), with PREFETCHT0 on amd64 and PRFM PLDL1KEEP on arm64.
// It never faults, whatever p is.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n uintptr)
