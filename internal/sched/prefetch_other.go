//go:build !amd64 && !arm64

package sched

import "unsafe"

// prefetch does nothing where the core has no assembly version.
func prefetch(unsafe.Pointer) {}
