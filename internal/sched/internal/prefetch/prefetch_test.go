package prefetch

import "testing"

// A prefetch is a hint: it must not fault on any address, nor change the
// memory it fetches.
func TestRecordNeverFaults(t *testing.T) {
	var small [3]byte
	big := make([]byte, 1000)
	big[999] = 7
	Record(&small)
	Record((*[1000]byte)(big))
	Record[[4096]byte](nil)
	if big[999] != 7 {
		t.Fatal("a prefetch changed memory")
	}
}
