package sched

import (
	"math/rand/v2"
	"testing"
)

// FuzzEvents drives the simulation's generator from the fuzzer's bytes:
// each input is a sequence of operations (queues, limits, jobs of every
// kind, workers, dispatches, pulls, completions, cancellations, leases and
// time), checked like the randomized simulation after every operation and
// drained at the end. A failure prints the operations the input stands
// for. Run it with make fuzz.
func FuzzEvents(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("usher: a job scheduler with tiers, keys, groups, reads and writes"))
	// Long inputs, so that mutations explore long histories too.
	for seed, n := range []int{256, 1024, 4096} {
		f.Add(simRandomBytes(uint64(seed), n))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := simRunFrom(&simByteSource{data: data}, "fuzz input", 1, simFuzzMaxOps); err != nil {
			t.Fatal(err)
		}
	})
}

// simFuzzMaxOps bounds the operations one fuzz input may describe.
const simFuzzMaxOps = 2000

func simRandomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0xf022))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	return out
}
