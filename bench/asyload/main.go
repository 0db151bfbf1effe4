// Command asyload measures the Asymptote service under load, in process,
// with real sandboxed backends: saturation throughput against the ideal
// (backends ÷ mean asy time) and the quality of queue-wait estimates (the
// first estimate each waiting client got against the wait it then had).
//
//	go run ./bench/asyload -backends 2 -tasks 60
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/usherhq/usher/internal/asybench"
	"github.com/usherhq/usher/internal/asyclient"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/service"
)

// sample is what one client saw.
type sample struct {
	estimate   time.Duration // the first estimate; -1 if the task never waited
	estimateAt time.Time
	passedAt   time.Time
	asyTime    time.Duration
	doneAt     time.Time
}

func main() {
	backends := flag.Int("backends", 2, "local sandboxed backends")
	tasks := flag.Int("tasks", 60, "tasks submitted at once for the saturation run")
	warmup := flag.Int("warmup", 10, "tasks run first so that the core learns durations")
	flag.Parse()
	addr, stop := startService(*backends)
	defer stop()
	run(addr, *warmup, 0)
	start := time.Now()
	samples := run(addr, *tasks, *warmup)
	report(samples, start, *backends)
}

func startService(backends int) (string, func()) {
	dir, err := os.MkdirTemp("", "asyload-")
	if err != nil {
		log.Fatal(err)
	}
	svc, err := service.New(service.Config{
		DataPath:      filepath.Join(dir, "usher.db"),
		LocalBackends: backends,
		Caps:          asyqueue.Caps{MaxQueuedPerClient: 100000, MaxQueued: 100000},
		Dispatcher:    asyqueue.DispatcherConfig{EstimateEvery: 200 * time.Millisecond},
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = svc.ServeListener(ctx, ln); close(done) }()
	return ln.Addr().String(), func() { cancel(); <-done; os.RemoveAll(dir) }
}

// run submits n distinct tasks at once and waits for all of them.
func run(addr string, n, offset int) []sample {
	out := make([]sample, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := compile(addr, fmt.Sprintf("%s// task %d\n", asybench.Figure, offset+i))
			if err != nil {
				log.Fatalf("task %d: %v", i, err)
			}
			out[i] = s
		}()
	}
	wg.Wait()
	return out
}

func compile(addr, source string) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := asyclient.Dial(ctx, "ws://"+addr+"/asy")
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	files := []asyclient.File{{Name: "fig.asy", Data: []byte(source), Main: true}}
	if err := c.Submit(ctx, files, asyclient.Options{Timeout: 3 * time.Second}); err != nil {
		return sample{}, err
	}
	return follow(ctx, c)
}

func follow(ctx context.Context, c *asyclient.Conn) (sample, error) {
	s := sample{estimate: -1}
	for {
		m, err := c.Next(ctx)
		if err != nil {
			return s, err
		}
		now := time.Now()
		switch {
		case m.Verb == "queue" && m.Passed:
			s.passedAt = now
		case m.Verb == "queue" && m.Estimate != nil && s.estimate < 0:
			s.estimate, s.estimateAt = *m.Estimate, now
		case m.Verb == "complete" && !m.Success:
			return s, fmt.Errorf("failed: %s", m.Error)
		case m.Verb == "complete":
			s.asyTime, s.doneAt = m.Time, now
			return s, nil
		case m.Verb == "denied":
			return s, fmt.Errorf("denied: %s", m.Error)
		}
	}
}

func report(samples []sample, start time.Time, backends int) {
	var asyTimes, errs []time.Duration
	var relErrs []float64
	last := start
	for _, s := range samples {
		asyTimes = append(asyTimes, s.asyTime)
		if s.doneAt.After(last) {
			last = s.doneAt
		}
		if s.estimate < 0 {
			continue
		}
		wait := s.passedAt.Sub(s.estimateAt)
		e := (s.estimate - wait).Abs()
		errs = append(errs, e)
		if wait > 0 {
			relErrs = append(relErrs, float64(e)/float64(wait))
		}
	}
	var sum time.Duration
	for _, d := range asyTimes {
		sum += d
	}
	mean := sum / time.Duration(len(asyTimes))
	elapsed := last.Sub(start)
	got := float64(len(samples)) / elapsed.Seconds()
	ideal := float64(backends) / mean.Seconds()
	fmt.Printf("saturation: %d tasks on %d backends in %.2f s: %.2f tasks/s; ideal backends ÷ mean asy time (%.0f ms) = %.2f tasks/s; ratio %.3f (goal ≥ 0.90)\n",
		len(samples), backends, elapsed.Seconds(), got, asybench.MS(mean), ideal, got/ideal)
	slices.Sort(relErrs)
	if len(relErrs) > 0 {
		fmt.Printf("estimates: %d waiting tasks; median absolute error %.0f ms, %.1f %% of the actual wait (goal ≤ 15 %%); p90 %.1f %%\n",
			len(relErrs), asybench.MS(asybench.Median(errs)), 100*relErrs[len(relErrs)/2], 100*relErrs[len(relErrs)*9/10])
	}
}
