package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/asyclient"
)

// arrivals configures the estimate run: clients arriving one by one, each
// with a figure that keeps asy busy for a random time.
type arrivals struct {
	clients          int
	every            time.Duration // between two arrivals
	busyMin, busyMax time.Duration // asy's busy time, uniform
	timeout          time.Duration // the tier the tasks choose (0: default)
	minWait          time.Duration // waits shorter than this are left out
	seed             uint64
}

// busyFigure keeps asy busy for d, then draws; n keeps the cache out.
func busyFigure(d time.Duration, n int) string {
	return fmt.Sprintf("usleep(%d); // %d\ndraw((0,0)--(1,1));\n", d.Microseconds(), n)
}

// told is one waiting client's first estimate and the wait it then had.
type toldWait struct {
	estimate, wait time.Duration
	position       int
	slot           time.Duration // from leaving the queue to the end
}

// runArrivals sends a.clients tasks a.every apart and returns, for each
// client that was told an estimate, that first estimate and its wait.
func runArrivals(url string, a arrivals, offset int) ([]toldWait, error) {
	rng := rand.New(rand.NewPCG(a.seed, uint64(offset)))
	busy := make([]time.Duration, a.clients)
	for i := range busy {
		busy[i] = a.busyMin + time.Duration(rng.Int64N(int64(a.busyMax-a.busyMin)+1))
	}
	out := make([]sample, a.clients)
	errs := make([]error, a.clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range a.clients {
		time.Sleep(time.Until(start.Add(time.Duration(i) * a.every))) // the arrival schedule
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = compileAt(url, busyFigure(busy[i], offset+i), a.timeout)
		}()
	}
	wg.Wait()
	var tw []toldWait
	failed := 0
	for i, s := range out {
		if errors.Is(errs[i], errRunFailed) {
			failed++ // the wait before the run still counts
		} else if errs[i] != nil {
			return nil, fmt.Errorf("client %d: %w", i, errs[i])
		}
		if s.estimate >= 0 {
			tw = append(tw, toldWait{estimate: s.estimate, wait: s.passedAt.Sub(s.estimateAt), position: s.position,
				slot: s.doneAt.Sub(s.passedAt)})
		}
	}
	if failed > 0 {
		fmt.Printf("%d of %d runs failed (e.g. stopped at their time limit); their waits still count\n", failed, a.clients)
	}
	return tw, nil
}

// compileAt runs one task through the /asy at url.
func compileAt(url, source string, timeout time.Duration) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := asyclient.Dial(ctx, url)
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	files := []asyclient.File{{Name: "fig.asy", Data: []byte(source), Main: true}}
	if err := c.Submit(ctx, files, asyclient.Options{Timeout: timeout}); err != nil {
		return sample{}, err
	}
	return follow(ctx, c)
}

// errorStats is the distribution of the first estimates' relative error,
// (estimate − wait) ÷ wait: negative when the estimate was short.
type errorStats struct {
	n                       int
	signedP10, signedMedian float64
	signedP90               float64
	absMedian, absP90       float64
	samples                 []toldWait
}

func estimateErrors(tw []toldWait, minWait time.Duration) errorStats {
	var signed, abs []float64
	for _, x := range tw {
		if x.wait < minWait {
			continue
		}
		e := float64(x.estimate-x.wait) / float64(x.wait)
		signed = append(signed, e)
		abs = append(abs, max(e, -e))
	}
	slices.Sort(signed)
	slices.Sort(abs)
	return errorStats{n: len(signed), signedP10: quantile(signed, 0.1), signedMedian: quantile(signed, 0.5),
		signedP90: quantile(signed, 0.9), absMedian: quantile(abs, 0.5), absP90: quantile(abs, 0.9), samples: tw}
}

// quantile of sorted s, interpolated; 0 for an empty s.
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	x := q * float64(len(s)-1)
	i := int(x)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (x-float64(i))*(s[i+1]-s[i])
}

func (e errorStats) String() string {
	return fmt.Sprintf("first estimates of %d clients that waited: signed error median %+.1f %% (p10 %+.1f %%, p90 %+.1f %%; goal within ±5 %%), absolute error median %.1f %% (p90 %.1f %%; goal ≤ 15 %%)",
		e.n, 100*e.signedMedian, 100*e.signedP10, 100*e.signedP90, 100*e.absMedian, 100*e.absP90)
}
