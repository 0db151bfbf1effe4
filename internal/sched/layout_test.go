package sched

import (
	"testing"
	"unsafe"
)

// The tables keep their records whole cache lines, so that a record never
// straddles two (chunk arrays start at least 64-byte aligned): a job is one
// line, a bucket two, a gate's counters half of one.
func TestRecordsFillWholeCacheLines(t *testing.T) {
	for _, c := range []struct {
		name       string
		size, want uintptr
	}{
		{"job", unsafe.Sizeof(job{}), 64},
		{"bucket", unsafe.Sizeof(bucket{}), 128},
		{"gateCounts", unsafe.Sizeof(gateCounts{}), 32},
	} {
		if c.size != c.want {
			t.Errorf("%s records are %d bytes, want %d", c.name, c.size, c.want)
		}
	}
}
