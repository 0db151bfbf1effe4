package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// placeNaive is place without the fitFrom hints: it scans from the first
// segment every time. The hinted place must agree with it exactly.
func (p *profile) placeNaive(now, d int64, tier int) int64 {
	last := len(p.times) - 1
	if !p.fits(last, tier) {
		return -1
	}
	d = max(d, 1)
	start, i := now, 0
	for i <= last {
		if !p.fits(i, tier) {
			i++
			start = p.times[i]
			continue
		}
		if i == last || p.times[i+1] >= start+d {
			break
		}
		i++
	}
	p.reserve(start, start+d, tier)
	return start
}

func TestProfilePlaceAgreesWithAFullScan(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tiers := 1 + rng.IntN(4)
		limits := make([]int, tiers)
		limits[0] = 1 + rng.IntN(8)
		for k := 1; k < tiers; k++ {
			limits[k] = 1 + rng.IntN(limits[k-1])
		}
		const now = 1000
		hinted, naive := newProfile(now, limits), newProfile(now, limits)
		for range 1 + rng.IntN(6) { // running jobs
			end, tier := now+1+rng.Int64N(500), rng.IntN(tiers)
			hinted.reserve(now, end, tier)
			naive.reserve(now, end, tier)
		}
		for n := range 200 {
			d, tier := rng.Int64N(300), rng.IntN(tiers)
			got, want := hinted.place(now, d, tier), naive.placeNaive(now, d, tier)
			if got != want {
				t.Fatalf("seed %d, placement %d (d %d, tier %d, limits %v): place = %d, a full scan = %d", seed, n, d, tier, limits, got, want)
			}
		}
		if !slices.Equal(hinted.times, naive.times) || !slices.Equal(hinted.free, naive.free) {
			t.Fatalf("seed %d: the profiles differ after the placements", seed)
		}
	}
}
