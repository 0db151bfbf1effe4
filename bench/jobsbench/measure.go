package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
)

// system is one job queue under test, with the server it needs. Every
// method but close is called from one goroutine; the handlers the workers
// run report to the hook given to startWorkers.
type system interface {
	// setup starts the system's server in dir (a temp dir of its own) with
	// an empty store.
	setup(ctx context.Context, dir string) error
	// reset empties the store; workers are stopped.
	reset(ctx context.Context) error
	// enqueue puts n no-op jobs in the store through the system's bulk API
	// (batches, pipelining or concurrent calls, as the system allows).
	enqueue(ctx context.Context, n int) error
	// enqueueOne puts one no-op job in the store with the system's single
	// enqueue call.
	enqueueOne(ctx context.Context) error
	// startWorkers starts workers that run up to concurrency jobs at once,
	// each calling h.begin and h.end; it returns when they are started.
	startWorkers(ctx context.Context, concurrency int, h *hook) error
	// stopWorkers stops them and waits for them to end.
	stopWorkers(ctx context.Context) error
	// unfinished is how many jobs the store holds that are not finished.
	unfinished(ctx context.Context) (int, error)
	// describe is the system's versions, durability settings and tuning.
	describe() description
	// close stops everything setup started; it may be called after a
	// failed or partial setup.
	close()
	scheduler
}

// description is what the report says of a system besides its figures.
type description struct {
	Version    string `json:"version"`
	Server     string `json:"server"`
	Durability string `json:"durability"`
	Tuning     string `json:"tuning"`
}

// hook counts the completions of one phase; handlers call begin and end.
type hook struct {
	target int64         // completions that close full
	full   chan struct{} // closed at the target-th completion
	starts chan time.Time
	failed chan error // a worker's failure, if any (capacity 1)
	done   atomic.Int64
	first  atomic.Int64 // unix ns of the first completion, 0 before
	last   atomic.Int64 // unix ns of the last completion
	late   *lateHook    // set in the lateness measurement
}

// newHook expects target completions; with pickups, each begin sends its
// time on h.starts.
func newHook(target int, pickups bool) *hook {
	h := &hook{target: int64(target), full: make(chan struct{}), failed: make(chan error, 1)}
	if pickups {
		h.starts = make(chan time.Time, 16)
	}
	return h
}

// begin is called by a handler first.
func (h *hook) begin() {
	if h.starts != nil {
		select {
		case h.starts <- time.Now():
		default:
		}
	}
}

// beginJob is called by a handler first with the job's payload: a job
// with a due time in it reports how late it started.
func (h *hook) beginJob(payload string) {
	if due, ok := parseDue(payload); ok && h.late != nil {
		h.late.started(h, due)
		return
	}
	h.begin()
}

// fail reports that the workers stopped working: the measurement fails
// at once rather than at its timeout.
func (h *hook) fail(err error) {
	select {
	case h.failed <- err:
	default:
	}
}

// end is called by a handler last.
func (h *hook) end() {
	now := time.Now().UnixNano()
	for {
		f := h.first.Load()
		if (f != 0 && f <= now) || h.first.CompareAndSwap(f, now) {
			break
		}
	}
	for {
		l := h.last.Load()
		if l >= now || h.last.CompareAndSwap(l, now) {
			break
		}
	}
	if h.done.Add(1) == h.target {
		close(h.full)
	}
}

// drained waits until the handlers ran target jobs and then until the
// store reports none unfinished (polled every 2 ms: completions may be
// recorded after the handler returned, in batches), and returns that time.
func drained(ctx context.Context, s system, h *hook, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %s", timeout))
	defer cancel()
	select {
	case <-h.full:
	case err := <-h.failed:
		return time.Time{}, fmt.Errorf("%d of %d jobs ran, then the workers failed: %w", h.done.Load(), h.target, err)
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("%d of %d jobs ran: %w", h.done.Load(), h.target, context.Cause(ctx))
	}
	for {
		n, err := s.unfinished(ctx)
		if err != nil {
			return time.Time{}, err
		}
		if n == 0 {
			return time.Now(), nil
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d jobs still unfinished: %w", n, context.Cause(ctx))
		}
	}
}

// processResult is one measurement of processing with all jobs enqueued.
type processResult struct {
	Concurrency int     `json:"concurrency"`
	Enqueue     float64 `json:"enqueuePerSec"`     // the bulk enqueue before it
	Process     float64 `json:"processPerSec"`     // first completion → store reports all finished
	Handlers    float64 `json:"handlersPerSec"`    // first → last handler return
	Drain       float64 `json:"drainSec"`          // workers' start → store reports all finished
	DrainRate   float64 `json:"drainPerSec"`       // n / Drain
	Confirm     float64 `json:"confirmLagMs"`      // last handler return → store reports all finished
	Startup     float64 `json:"firstCompletionMs"` // workers' start → first completion
}

// measureProcess empties the store, enqueues n jobs in bulk with no
// workers, then starts workers and times them through the backlog.
func measureProcess(ctx context.Context, s system, n, concurrency int, timeout time.Duration) (processResult, error) {
	r := processResult{Concurrency: concurrency}
	if err := s.reset(ctx); err != nil {
		return r, fmt.Errorf("reset: %w", err)
	}
	t0 := time.Now()
	if err := s.enqueue(ctx, n); err != nil {
		return r, fmt.Errorf("enqueue: %w", err)
	}
	r.Enqueue = float64(n) / time.Since(t0).Seconds()
	if u, err := s.unfinished(ctx); err != nil || u != n {
		return r, fmt.Errorf("after enqueueing %d jobs the store holds %d unfinished (%v)", n, u, err)
	}
	h := newHook(n, false)
	start := time.Now()
	if err := s.startWorkers(ctx, concurrency, h); err != nil {
		return r, fmt.Errorf("start workers: %w", err)
	}
	end, err := drained(ctx, s, h, timeout)
	if serr := s.stopWorkers(ctx); err == nil && serr != nil {
		err = fmt.Errorf("stop workers: %w", serr)
	}
	if err != nil {
		return r, err
	}
	first, last := time.Unix(0, h.first.Load()), time.Unix(0, h.last.Load())
	r.Process = float64(n-1) / end.Sub(first).Seconds()
	r.Handlers = float64(n-1) / last.Sub(first).Seconds()
	r.Drain = end.Sub(start).Seconds()
	r.DrainRate = float64(n) / r.Drain
	r.Confirm = ms(end.Sub(last))
	r.Startup = ms(first.Sub(start))
	return r, nil
}

// e2eResult is one measurement of enqueueing while workers run.
type e2eResult struct {
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"perSec"`        // n / (enqueue start → store reports all finished)
	Enqueue     float64 `json:"enqueuePerSec"` // the bulk enqueue, while workers ran
	Total       float64 `json:"totalSec"`
}

// measureE2E empties the store, starts workers, waits settle for them to
// be idle, then enqueues n jobs in bulk and times until all are finished.
func measureE2E(ctx context.Context, s system, n, concurrency int, settle, timeout time.Duration) (e2eResult, error) {
	r := e2eResult{Concurrency: concurrency}
	if err := s.reset(ctx); err != nil {
		return r, fmt.Errorf("reset: %w", err)
	}
	h := newHook(n, false)
	if err := s.startWorkers(ctx, concurrency, h); err != nil {
		return r, fmt.Errorf("start workers: %w", err)
	}
	time.Sleep(settle)
	t0 := time.Now()
	err := s.enqueue(ctx, n)
	t1 := time.Now()
	var end time.Time
	if err == nil {
		end, err = drained(ctx, s, h, timeout)
	} else {
		err = fmt.Errorf("enqueue: %w", err)
	}
	if serr := s.stopWorkers(ctx); err == nil && serr != nil {
		err = fmt.Errorf("stop workers: %w", serr)
	}
	if err != nil {
		return r, err
	}
	r.Total = end.Sub(t0).Seconds()
	r.Rate = float64(n) / r.Total
	r.Enqueue = float64(n) / t1.Sub(t0).Seconds()
	return r, nil
}

// measurePickup empties the store, starts workers, and then count times:
// waits a random time in [0, gap) on the idle system, enqueues one job and
// measures from the start of the enqueue call to the start of its handler,
// then waits for it to finish. The random wait puts the enqueue at a
// random point of any polling cycle.
func measurePickup(ctx context.Context, s system, concurrency, count int, gap, timeout time.Duration) ([]time.Duration, error) {
	if err := s.reset(ctx); err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	h := newHook(count, true)
	if err := s.startWorkers(ctx, concurrency, h); err != nil {
		return nil, fmt.Errorf("start workers: %w", err)
	}
	lat, err := pickups(ctx, s, h, count, gap, timeout)
	if serr := s.stopWorkers(ctx); err == nil && serr != nil {
		err = fmt.Errorf("stop workers: %w", serr)
	}
	return lat, err
}

func pickups(ctx context.Context, s system, h *hook, count int, gap, timeout time.Duration) ([]time.Duration, error) {
	time.Sleep(gap) // let start-up work settle
	var out []time.Duration
	for i := range count {
		if gap > 0 {
			time.Sleep(rand.N(gap))
		}
		t0 := time.Now()
		if err := s.enqueueOne(ctx); err != nil {
			return out, fmt.Errorf("enqueue %d: %w", i, err)
		}
		select {
		case t := <-h.starts:
			out = append(out, t.Sub(t0))
		case err := <-h.failed:
			return out, fmt.Errorf("the workers failed: %w", err)
		case <-time.After(timeout):
			return out, fmt.Errorf("job %d did not start within %s", i, timeout)
		}
		deadline := time.Now().Add(timeout)
		for h.done.Load() < int64(i+1) {
			if time.Now().After(deadline) {
				return out, fmt.Errorf("job %d did not finish within %s", i, timeout)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return out, nil
}

// enqueueBatches sends n jobs in batches of at most batch, from workers
// goroutines at once, each calling send with its batch size.
func enqueueBatches(ctx context.Context, n, batch, workers int, send func(ctx context.Context, size int) error) error {
	if batch < 1 || workers < 1 {
		return errors.New("batch and enqueuers must be at least 1")
	}
	var next atomic.Int64
	errs := make(chan error, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		go func() {
			for {
				end := next.Add(int64(batch))
				start := end - int64(batch)
				if start >= int64(n) {
					errs <- nil
					return
				}
				if err := send(ctx, int(min(end, int64(n))-start)); err != nil {
					cancel()
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// stats are the median and spread of samples.
type stats struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Runs   []float64 `json:"runs"`
}

func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{Median: m, Min: s[0], Max: s[len(s)-1], Runs: xs}
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
