//go:build amd64 || arm64

package prefetch

import "unsafe"

// lines starts fetching the cache lines of the n bytes at p (at
// least one line), with PREFETCHT0 on amd64 and PRFM PLDL1KEEP on arm64.
// It never faults, whatever p is.
//
//go:noescape
func lines(p unsafe.Pointer, n uintptr)
