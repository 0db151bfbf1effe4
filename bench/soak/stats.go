package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stats counts how tasks and requests ended; safe for concurrent use.
type stats struct {
	succeeded, denied, failed, hostileEnded, vanished atomic.Int64
	lost, twice, dialFailed                           atomic.Int64
	renderMisses, renderDenied, renderFailed          atomic.Int64

	mu       sync.Mutex
	hits     []time.Duration // cached renders since the last sample
	failures map[string]int  // the error texts of ordinary figures that failed
}

func newStats() *stats { return &stats{failures: map[string]int{}} }

// fail counts an ordinary figure that failed, by its error text.
func (s *stats) fail(text string) {
	s.failed.Add(1)
	s.mu.Lock()
	s.failures[text]++
	s.mu.Unlock()
}

func (s *stats) add(c *atomic.Int64) { c.Add(1) }

func (s *stats) hit(d time.Duration) {
	s.mu.Lock()
	s.hits = append(s.hits, d)
	s.mu.Unlock()
}

// takeHits returns and clears the cached renders' latencies.
func (s *stats) takeHits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hits
	s.hits = nil
	return h
}

// sample is the server's state at the end of one interval.
type sample struct {
	at       time.Duration
	rssKiB   int64
	openFDs  int
	hits     int
	p50, p99 time.Duration
}

// watch prints a sample every interval until ctx ends, and returns them.
func watch(ctx context.Context, pid int, every time.Duration, st *stats, out io.Writer) []sample {
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	fmt.Fprintln(out, "| at | RSS MiB | open files | cached renders | p50 ms | p99 ms | tasks ok / denied / failed / hostile / vanished | lost | twice |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
	var samples []sample
	for {
		select {
		case <-ctx.Done():
			return samples
		case <-tick.C:
		}
		h := st.takeHits()
		slices.Sort(h)
		sm := sample{at: time.Since(start).Round(time.Second), rssKiB: rss(pid), openFDs: openFiles(pid), hits: len(h),
			p50: quantile(h, 0.50), p99: quantile(h, 0.99)}
		samples = append(samples, sm)
		fmt.Fprintf(out, "| %v | %.1f | %d | %d | %.2f | %.2f | %d / %d / %d / %d / %d | %d | %d |\n",
			sm.at, float64(sm.rssKiB)/1024, sm.openFDs, sm.hits, ms(sm.p50), ms(sm.p99),
			st.succeeded.Load(), st.denied.Load(), st.failed.Load(), st.hostileEnded.Load(), st.vanished.Load(),
			st.lost.Load(), st.twice.Load())
	}
}

// verdict prints the totals and checks the promises.
func verdict(st *stats, samples []sample, out io.Writer) bool {
	ok := true
	check := func(good bool, format string, args ...any) {
		mark := "ok  "
		if !good {
			mark, ok = "FAIL", false
		}
		fmt.Fprintf(out, "%s "+format+"\n", append([]any{mark}, args...)...)
	}
	tasks := st.succeeded.Load() + st.denied.Load() + st.failed.Load() + st.hostileEnded.Load()
	fmt.Fprintf(out, "\n%d WebSocket tasks answered (%d succeeded, %d denied, %d hostile ended in an error, %d ordinary failed), %d clients vanished; render API: %d misses rendered, %d denied\n",
		tasks, st.succeeded.Load(), st.denied.Load(), st.hostileEnded.Load(), st.failed.Load(), st.vanished.Load(),
		st.renderMisses.Load(), st.renderDenied.Load())
	check(st.lost.Load() == 0, "no task lost: %d without an end message", st.lost.Load())
	check(st.twice.Load() == 0, "no task answered twice: %d", st.twice.Load())
	check(st.failed.Load() == 0, "ordinary figures succeed or are denied: %d failed", st.failed.Load())
	for text, n := range st.failures {
		fmt.Fprintf(out, "     %d× %q\n", n, text)
	}
	check(st.dialFailed.Load() == 0 && st.renderFailed.Load() == 0, "every connection and render request answered: %d dials, %d renders failed",
		st.dialFailed.Load(), st.renderFailed.Load())
	if len(samples) < 3 {
		fmt.Fprintln(out, "too short for the flatness checks (fewer than 3 samples)")
		return ok
	}
	// The first third warms up: caches fill, the Go heap finds its size.
	base, last := samples[len(samples)/3], samples[len(samples)-1]
	check(float64(last.rssKiB) <= 1.2*float64(base.rssKiB), "memory flat: %.1f MiB at %v, %.1f MiB at the end (bound: +20 %%)",
		float64(base.rssKiB)/1024, base.at, float64(last.rssKiB)/1024)
	check(last.openFDs <= base.openFDs+16, "open files flat: %d at %v, %d at the end (bound: +16)", base.openFDs, base.at, last.openFDs)
	// A sample without cached renders has no p99: the p99's baseline is
	// the first sample after the warm-up that has some.
	warm := samples[len(samples)/3 : len(samples)-1]
	i := slices.IndexFunc(warm, func(s sample) bool { return s.hits > 0 })
	if i < 0 || last.hits == 0 {
		fmt.Fprintln(out, "too few cached renders for the p99 check (none in a sample after the warm-up, or in the last)")
		return ok
	}
	pb := warm[i]
	check(last.p99 <= 2*pb.p99+time.Millisecond, "cached renders' p99 stable: %.2f ms at %v, %.2f ms at the end (bound: 2× + 1 ms)",
		ms(pb.p99), pb.at, ms(last.p99))
	return ok
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rss reads a process's resident memory in KiB from /proc.
func rss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// openFiles counts a process's open file descriptors.
func openFiles(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}
