package main

import (
	"math"
	"testing"
	"time"
)

// The smoke run of the estimate benchmark: a few clients through a service
// in process, so that make test keeps the program working.
func TestEstimatesSmoke(t *testing.T) {
	addr, stop := startService(1)
	defer stop()
	a := arrivals{clients: 3, every: 50 * time.Millisecond, busyMin: 0, busyMax: 100 * time.Millisecond,
		timeout: 10 * time.Second, minWait: 0, seed: 1}
	stats, err := measureEstimates("ws://"+addr+"/asy", a, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// One backend: at least the later clients wait and each is told; on a
	// loaded machine the first may wait too (the warm-up task still runs).
	if stats.n < 1 || stats.n > 3 {
		t.Fatalf("%d waiting clients measured, want 1 to 3: %v", stats.n, stats)
	}
	t.Log(stats)
}

func TestEstimateErrors(t *testing.T) {
	s := time.Second
	cases := []struct {
		name           string
		tw             []toldWait
		minWait        time.Duration
		n              int
		signed, absMed float64
	}{
		{"exact", []toldWait{{estimate: 2 * s, wait: 2 * s}}, s, 1, 0, 0},
		{"short and long", []toldWait{{estimate: s, wait: 2 * s}, {estimate: 3 * s, wait: 2 * s}, {estimate: 2 * s, wait: 2 * s}}, s, 3, 0, 0.5},
		{"short waits left out", []toldWait{{estimate: 0, wait: s / 2}, {estimate: 4 * s, wait: 2 * s}}, s, 1, 1, 1},
		{"none", nil, s, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := estimateErrors(c.tw, c.minWait)
			if got.n != c.n || math.Abs(got.signedMedian-c.signed) > 1e-9 || math.Abs(got.absMedian-c.absMed) > 1e-9 {
				t.Fatalf("got n %d, signed median %v, absolute median %v; want %d, %v, %v", got.n, got.signedMedian, got.absMedian, c.n, c.signed, c.absMed)
			}
		})
	}
}
