package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// scheduler is how a system runs jobs at a due time: each system gives the
// variants of its job scheduler to measure (its default first), and how
// early it may start a job by design.
type scheduler interface {
	// enqueueScheduled puts n no-op jobs in the store through the bulk
	// API, job i due at due(i), its due time in its payload. It returns
	// an error if the system did not take them as scheduled jobs.
	enqueueScheduled(ctx context.Context, n int, due func(i int) time.Time) error
	// variants are the settings of the system's job scheduler to measure
	// lateness with, the system's default first.
	variants() []variant
	// useVariant makes the next startWorkers use v.
	useVariant(v variant)
	// earlyAllowance is how much before its due time the system may start
	// a job by design (asynq keeps due times in whole seconds).
	earlyAllowance() time.Duration
}

// variant is one setting of a system's job scheduler.
type variant struct {
	Name     string        `json:"name"`
	Interval time.Duration `json:"interval"` // 0: the system has no polling interval, or its default
}

// payloadDue is the due time a job's payload carries, in Unix nanoseconds
// as text; the empty payload of an immediate job has none.
func payloadDue(due time.Time) string { return strconv.FormatInt(due.UnixNano(), 10) }

// parseDue reads payloadDue; ok is false for an immediate job.
func parseDue(s string) (time.Time, bool) {
	ns, err := strconv.ParseInt(strings.Trim(s, `"`), 10, 64)
	if err != nil || ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// lateHook records, for jobs with a due time, how late each started.
type lateHook struct {
	mu    sync.Mutex
	late  []time.Duration
	early time.Duration // a start earlier than this before due is an error
}

// started is called by a handler of a job due at due.
func (l *lateHook) started(h *hook, due time.Time) {
	d := time.Since(due)
	l.mu.Lock()
	l.late = append(l.late, d)
	l.mu.Unlock()
	if d < -l.early {
		h.fail(fmt.Errorf("a job started %s before its due time: the system ran a scheduled job early (or ignored its due time)",
			(-d).Round(time.Millisecond)))
	}
}

// lateResult is one system's scheduled-job measurement.
type lateResult struct {
	Waiting          int           `json:"waiting"`                // scheduled jobs in the store, due long after the measurement
	EnqueueImmediate float64       `json:"enqueueImmediatePerSec"` // bulk enqueue of as many immediate jobs
	EnqueueScheduled float64       `json:"enqueueScheduledPerSec"` // bulk enqueue of the waiting jobs
	Variants         []lateVariant `json:"variants"`
	Error            string        `json:"error,omitempty"`
}

// lateVariant is the lateness of the probes under one scheduler setting.
type lateVariant struct {
	variant
	Probes int       `json:"probes"`
	P50    float64   `json:"p50Ms"`
	P99    float64   `json:"p99Ms"`
	Max    float64   `json:"maxMs"`
	Min    float64   `json:"minMs"` // negative: started before its due time
	Late   []float64 `json:"lateMs"`
	Error  string    `json:"error,omitempty"`
}

// lateConfig is the command line of the lateness measurement.
type lateConfig struct {
	waiting map[string]int // per system; "" is the default
	probes  int
	lead    time.Duration
	window  time.Duration
	horizon time.Duration
}

// parseWaiting reads "1000000" or "200000,usher=1000000": a bare count is
// every system's, name=count one system's.
func parseWaiting(s string) (map[string]int, error) {
	out := map[string]int{}
	for f := range strings.SplitSeq(s, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			name, count = "", name
		}
		v, err := strconv.Atoi(count)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q: a count must be a whole number ≥ 0", f)
		}
		out[name] = v
	}
	return out, nil
}

func (c lateConfig) waitingFor(name string) int {
	if v, ok := c.waiting[name]; ok {
		return v
	}
	return c.waiting[""]
}

// measureLateness empties the store and times the bulk enqueue of n
// immediate jobs, empties it again and times the bulk enqueue of n
// scheduled jobs due after cfg.horizon (they wait through the whole
// measurement). Then, for each variant of the system's scheduler, it
// enqueues cfg.probes jobs due at random times spread over cfg.window,
// from cfg.lead after the enqueue on, starts idle workers, and records how
// late each probe starts after its due time.
func measureLateness(ctx context.Context, s system, cfg lateConfig, n, concurrency int) lateResult {
	r := lateResult{Waiting: n}
	sc := scheduler(s)
	fail := func(err error) lateResult { r.Error = err.Error(); return r }
	if err := s.reset(ctx); err != nil {
		return fail(fmt.Errorf("reset: %w", err))
	}
	if n > 0 {
		t0 := time.Now()
		if err := s.enqueue(ctx, n); err != nil {
			return fail(fmt.Errorf("immediate enqueue: %w", err))
		}
		r.EnqueueImmediate = float64(n) / time.Since(t0).Seconds()
		if err := s.reset(ctx); err != nil {
			return fail(fmt.Errorf("reset: %w", err))
		}
		base := time.Now().Add(cfg.horizon)
		t0 = time.Now()
		err := sc.enqueueScheduled(ctx, n, func(i int) time.Time {
			return base.Add(time.Duration(i) * cfg.horizon / time.Duration(n)) // spread over [horizon, 2·horizon)
		})
		if err != nil {
			return fail(fmt.Errorf("scheduled enqueue: %w", err))
		}
		r.EnqueueScheduled = float64(n) / time.Since(t0).Seconds()
		progress("  %d waiting jobs: immediate enqueue %.0f/s, scheduled %.0f/s", n, r.EnqueueImmediate, r.EnqueueScheduled)
	}
	for _, v := range sc.variants() {
		lv := lateVariant{variant: v, Probes: cfg.probes}
		lat, err := probeLateness(ctx, s, sc, v, cfg, concurrency)
		if err != nil {
			lv.Error = err.Error()
		}
		lv.set(lat)
		r.Variants = append(r.Variants, lv)
		progress("  %s: lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms, min %.1f ms%s", v.Name, lv.P50, lv.P99, lv.Max, lv.Min, errNote(lv.Error))
	}
	return r
}

// probeLateness enqueues the probes and runs idle workers with variant v
// until all probes ran.
func probeLateness(ctx context.Context, s system, sc scheduler, v variant, cfg lateConfig, concurrency int) ([]time.Duration, error) {
	if cfg.probes < 1 {
		return nil, errors.New("no probes")
	}
	lh := &lateHook{early: sc.earlyAllowance() + 10*time.Millisecond}
	h := newHook(cfg.probes, false)
	h.late = lh
	base := time.Now().Add(cfg.lead)
	slot := cfg.window / time.Duration(cfg.probes)
	if err := sc.enqueueScheduled(ctx, cfg.probes, func(i int) time.Time {
		return base.Add(time.Duration(i)*slot + rand.N(slot+1))
	}); err != nil {
		return nil, fmt.Errorf("probe enqueue: %w", err)
	}
	sc.useVariant(v)
	if err := s.startWorkers(ctx, concurrency, h); err != nil {
		return nil, fmt.Errorf("start workers: %w", err)
	}
	timeout := cfg.lead + cfg.window + 2*max(v.Interval, 5*time.Second) + time.Minute
	ctx2, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %s", timeout))
	var err error
	select {
	case <-h.full:
	case err = <-h.failed:
	case <-ctx2.Done():
		err = fmt.Errorf("%d of %d probes ran: %w", h.done.Load(), cfg.probes, context.Cause(ctx2))
	}
	cancel()
	if serr := s.stopWorkers(ctx); err == nil && serr != nil {
		err = fmt.Errorf("stop workers: %w", serr)
	}
	lh.mu.Lock()
	defer lh.mu.Unlock()
	return slices.Clone(lh.late), err
}

func (lv *lateVariant) set(lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	for _, d := range lat {
		lv.Late = append(lv.Late, ms(d))
	}
	lv.P50, lv.P99 = ms(quantile(sorted, 0.5)), ms(quantile(sorted, 0.99))
	lv.Min, lv.Max = ms(sorted[0]), ms(sorted[len(sorted)-1])
}

func errNote(e string) string {
	if e == "" {
		return ""
	}
	return "; ERROR: " + e
}
