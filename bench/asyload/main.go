// Command asyload measures the Asymptote service under load, in process,
// with real sandboxed backends, or any running server given -url.
//
// -mode saturation: tasks submitted at once; throughput against the ideal
// (backends ÷ mean asy time) and the quality of queue-wait estimates (the
// first estimate each waiting client got against the wait it then had).
//
// -mode estimates: clients arriving -every apart, each with a figure that
// keeps asy busy a random time in [-busy-min, -busy-max]; the signed and
// absolute error of each waiting client's first estimate, relative to the
// wait it then had, for waits of at least -min-wait.
//
//	go run ./bench/asyload -backends 2 -tasks 60
//	go run ./bench/asyload -mode estimates -backends 2 -clients 40 -every 150ms -runs 3
//	go run ./bench/asyload -mode estimates -url ws://127.0.0.1:8080/asy -clients 40 -runs 3
package main

import (
	"context"
	"errors"
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
	position   int           // with the first estimate
	estimateAt time.Time
	passedAt   time.Time
	asyTime    time.Duration
	doneAt     time.Time
}

func main() {
	mode := flag.String("mode", "saturation", "saturation or estimates")
	url := flag.String("url", "", "the /asy of a running server (ws://host:port/asy); empty: a service in process")
	backends := flag.Int("backends", 2, "local sandboxed backends of the service in process")
	tasks := flag.Int("tasks", 60, "tasks submitted at once for the saturation run")
	warmup := flag.Int("warmup", 10, "tasks run first so that the core learns durations")
	taskTimeout := flag.Duration("task-timeout", 3*time.Second, "saturation: the time limit each task names, a tier's (3s, 10s or 30s by default)")
	var a arrivals
	flag.IntVar(&a.clients, "clients", 40, "estimates: clients per run")
	flag.DurationVar(&a.every, "every", 150*time.Millisecond, "estimates: time between two arrivals")
	flag.DurationVar(&a.busyMin, "busy-min", 200*time.Millisecond, "estimates: least time a figure keeps asy busy")
	flag.DurationVar(&a.busyMax, "busy-max", 2500*time.Millisecond, "estimates: most time a figure keeps asy busy")
	flag.DurationVar(&a.timeout, "timeout", 10*time.Second, "estimates: the tier the tasks choose (0: default tasks)")
	flag.DurationVar(&a.minWait, "min-wait", time.Second, "estimates: shorter waits are left out")
	flag.Uint64Var(&a.seed, "seed", 1, "estimates: seed of the busy times")
	runs := flag.Int("runs", 1, "estimates: runs, pooled")
	verbose := flag.Bool("v", false, "estimates: print every waiting client's first estimate and wait")
	flag.Parse()
	if a.clients < 1 || a.every < 0 || a.busyMin < 0 || a.busyMax < a.busyMin || *runs < 1 || *warmup < 0 {
		log.Fatal("want -clients ≥ 1, -runs ≥ 1, -warmup ≥ 0, -every ≥ 0 and 0 ≤ -busy-min ≤ -busy-max")
	}
	target := *url
	if target == "" {
		addr, stop := startService(*backends)
		defer stop()
		target = "ws://" + addr + "/asy"
	}
	switch *mode {
	case "saturation":
		run(target, *warmup, 0, *taskTimeout)
		start := time.Now()
		samples := run(target, *tasks, *warmup, *taskTimeout)
		report(samples, start, *backends)
	case "estimates":
		stats, err := measureEstimates(target, a, *warmup, *runs)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(stats)
		if *verbose {
			for _, x := range stats.samples {
				fmt.Printf("position %2d: told %6.0f ms, waited %6.0f ms, slot %5.0f ms\n", x.position, asybench.MS(x.estimate), asybench.MS(x.wait), asybench.MS(x.slot))
			}
		}
	default:
		log.Fatalf("-mode %q: want saturation or estimates", *mode)
	}
}

// measureEstimates warms the core up with warmup tasks of the same kind,
// arriving the same way, then pools the first estimates of runs arrival
// runs.
func measureEstimates(url string, a arrivals, warmup, runs int) (errorStats, error) {
	w := a
	w.clients = warmup
	if warmup > 0 {
		if _, err := runArrivals(url, w, 0); err != nil {
			return errorStats{}, fmt.Errorf("warmup: %w", err)
		}
	}
	var all []toldWait
	for r := range runs {
		tw, err := runArrivals(url, a, (r+1)*100000)
		if err != nil {
			return errorStats{}, fmt.Errorf("run %d: %w", r+1, err)
		}
		if runs > 1 {
			fmt.Printf("run %d: %v\n", r+1, estimateErrors(tw, a.minWait))
		}
		all = append(all, tw...)
	}
	return estimateErrors(all, a.minWait), nil
}

func startService(backends int) (string, func()) {
	dir, err := os.MkdirTemp("", "asyload-")
	if err != nil {
		log.Fatal(err)
	}
	svc, err := service.New(service.Config{
		DataPath:      filepath.Join(dir, "usher.db"),
		LocalBackends: backends,
		MediumLimit:   backends, // a medium task may run on every backend
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

// run submits n distinct tasks at once, each with the time limit
// timeout, and waits for all of them.
func run(url string, n, offset int, timeout time.Duration) []sample {
	out := make([]sample, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := compileAt(url, fmt.Sprintf("%s// task %d\n", asybench.Figure, offset+i), timeout)
			if err != nil {
				log.Fatalf("task %d: %v", i, err)
			}
			out[i] = s
		}()
	}
	wg.Wait()
	return out
}

// errRunFailed: the task ran but asy failed (or its time limit stopped it).
var errRunFailed = errors.New("failed")

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
			if m.Position != nil {
				s.position = *m.Position
			}
		case m.Verb == "complete" && !m.Success:
			s.doneAt = now
			return s, fmt.Errorf("%w: %s", errRunFailed, m.Error)
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
