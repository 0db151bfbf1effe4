//go:build !amd64 && !arm64

package sched

import "unsafe"

// prefetchLines does nothing where the core has no assembly version.
func prefetchLines(unsafe.Pointer, uintptr) {}
