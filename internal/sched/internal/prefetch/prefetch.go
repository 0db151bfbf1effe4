// Package prefetch asks the CPU to start fetching memory the scheduling
// core will read soon, so that the read then finds it in cache instead of
// waiting for memory. Its calls are hints: they change nothing the core
// computes, and on an architecture without an assembly version they do
// nothing.
package prefetch

import "unsafe"

// Record starts fetching the cache lines of the record at p, which the
// caller will read in a later call. It never faults, whatever p is.
func Record[T any](p *T) { lines(unsafe.Pointer(p), unsafe.Sizeof(*p)) }
