// Command ratehold measures how well a key rate holds under
// oversubscription, end to end: a server (the jobs engine and the /v1 API
// over a real SQLite file, real clock) with a rate on one key, an
// enqueuer that submits ten times more jobs of that key than the rate
// allows, and one agent (client.Worker) with many slots that completes
// each job at once. It counts the starts the agent sees in the measured
// window and reports the rate held against the one set:
//
//	go run ./bench/ratehold -rate 100/s -duration 60s
//
// The first second (the burst and the agent's first lease) is left out
// of the window. A tiny run (-duration 2s) is part of make bench-smoke.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/usherhq/usher/client"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

func main() {
	rate := flag.String("rate", "100/s", "the key's rate: N/s, N/m or N/h")
	burst := flag.Int("burst", 0, "the key's burst (0: the server's default, a second's worth)")
	over := flag.Int("over", 10, "submit this many times the rate")
	duration := flag.Duration("duration", 60*time.Second, "the measured window")
	slots := flag.Int("slots", 256, "the agent's slots")
	flag.Parse()
	if err := run(*rate, *burst, *over, *duration, *slots); err != nil {
		fmt.Fprintln(os.Stderr, "ratehold:", err)
		os.Exit(1)
	}
}

func run(rate string, burst, over int, window time.Duration, slots int) error {
	count, per, err := jobtype.ParseRate(rate)
	if err != nil {
		return err
	}
	want := float64(count) / per.Seconds() // starts per second
	dir, err := os.MkdirTemp("", "ratehold")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, stop, err := jobsapitest.Open(filepath.Join(dir, "usher.db"), jobsapitest.Options{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client.New(s.URL, s.AdminToken)
	if _, err := c.CreateQueue(ctx, client.QueueSpec{Name: "q"}); err != nil {
		return err
	}
	l, err := c.PutKeyLimit(ctx, client.KeyLimit{Pattern: "api:*", Rate: rate, Burst: burst})
	if err != nil {
		return err
	}
	burst = l.Burst
	var mu sync.Mutex
	var starts []time.Time
	w := &client.Worker{Client: c, Agent: "ratehold", Concurrency: slots, WaitMs: 1000,
		Handlers: map[string]client.Handler{"q": func(context.Context, *client.LeasedJob) (string, error) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return "", nil
		}}}
	w.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	go w.Run(ctx)
	warm := time.Second
	t0 := time.Now()
	end := t0.Add(warm + window)
	if err := submit(ctx, c, want*float64(over), end); err != nil {
		return err
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	from, to := t0.Add(warm), end
	n := 0
	for _, at := range starts {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	got := float64(n) / window.Seconds()
	fmt.Printf("rate %s burst %d, %dx oversubscribed, %v window: %d starts, %.2f/s held, %+.2f%% off the rate (%d starts in all)\n",
		rate, burst, over, window, n, got, 100*(got-want)/want, len(starts))
	return nil
}

// submit enqueues jobs of key api:bench at perSec a second, in batches
// every 50 ms, until end.
func submit(ctx context.Context, c *client.Client, perSec float64, end time.Time) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	start, sent := time.Now(), 0
	for now := range tick.C {
		if !now.Before(end) {
			return nil
		}
		due := int(now.Sub(start).Seconds() * perSec)
		var batch []client.JobSpec
		for ; sent < due; sent++ {
			batch = append(batch, client.JobSpec{Queue: "q", Keys: []string{"api:bench"}})
		}
		if len(batch) > 0 {
			if _, err := c.Enqueue(ctx, batch...); err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
		}
	}
	return nil
}
