// Command jobsbench measures usher's generic job queue side by side with
// two anchors, in one go and on one machine: hibiken/asynq (on a
// redis-server it starts) and riverqueue/river (on a PostgreSQL cluster it
// creates with initdb), with the same count of no-op jobs:
//
//   - bulk enqueue: jobs/s putting n jobs in the store with no workers, in
//     batches as each system's bulk API allows;
//   - processing: jobs/s from the first completion to the moment the store
//     reports all n finished, with all of them enqueued before the workers
//     start (at each of a few worker concurrencies; the best is kept);
//   - end to end: n / (start of the bulk enqueue → all finished), with the
//     workers running;
//   - pickup latency on an idle system: from the start of one enqueue call
//     to the start of its handler, median and p90;
//   - scheduled jobs: the bulk enqueue of -scheduled jobs due in an hour or
//     more, beside that of as many immediate jobs; then, with those jobs
//     waiting, how late -probes jobs due at random times start on idle
//     workers (p50, p99, max, earliest), under each setting of the system's
//     job scheduler (asynq's forwarder interval; River's fetch poll).
//
// Every server listens on 127.0.0.1 only, lives in a temp dir, and is
// stopped at the end (or when the bench dies: the parent-death signal).
//
//	go run . -n 100000 -systems usher,asynq,river
//
// It is a module of its own (bench/jobsbench/go.mod) so that the anchors
// never become dependencies of usher's go.mod. scripts/deps.sh installs
// redis-server and postgresql; `make bench-jobs` runs it, then the bench.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	n         int
	systems   []string
	json      bool
	runs      int
	pickups   int
	pickupGap time.Duration
	settle    time.Duration
	timeout   time.Duration
	conc      map[string][]int
	late      lateConfig
}

func main() {
	cfg := config{conc: map[string][]int{}}
	flag.IntVar(&cfg.n, "n", 100000, "no-op jobs per measurement")
	systems := flag.String("systems", "usher,usher-redis,asynq,river", "systems to measure, comma-separated: usher, usher-redis (multi-node mode), asynq, river")
	flag.BoolVar(&cfg.json, "json", false, "print the report as JSON instead of tables")
	flag.IntVar(&cfg.runs, "runs", 3, "measurements of processing and end to end per system at its best concurrency (systems take turns)")
	flag.IntVar(&cfg.pickups, "pickups", 50, "single enqueues for the pickup latency")
	flag.DurationVar(&cfg.pickupGap, "pickup-gap", time.Second, "before each pickup enqueue, wait a random time below this")
	flag.DurationVar(&cfg.settle, "settle", time.Second, "idle time between starting workers and the end-to-end enqueue")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "the longest one measurement may take")

	waiting := flag.String("scheduled", "1000000", "scheduled-job lateness: jobs waiting (due in an hour or more) while it is measured; a count for every system, or name=count for one (\"100000,usher=1000000\")")
	flag.IntVar(&cfg.late.probes, "probes", 200, "scheduled-job lateness: jobs due during the measurement, per scheduler setting (0 skips the lateness measurement)")
	flag.DurationVar(&cfg.late.lead, "probe-lead", 3*time.Second, "scheduled-job lateness: the first probe is due this long after the probes were enqueued")
	flag.DurationVar(&cfg.late.window, "probe-window", 20*time.Second, "scheduled-job lateness: the probes' due times are spread over this long")

	usherConc := flag.String("usher-concurrency", "1024,4096,8192", "usher worker concurrencies to try")
	usherBatch := flag.Int("usher-batch", 1000, "usher: jobs per client.Enqueue call")
	usherEnqueuers := flag.Int("usher-enqueuers", 2, "usher: concurrent client.Enqueue calls")
	usherAgents := flag.Int("usher-agents", 1, "usher: client.Workers (agents) the concurrency is split over (the server takes at most 10,000 slots per agent)")
	usherBin := flag.String("usher-bin", "", "usher: the binary to serve with (default: build ../../cmd/usher into the temp dir)")

	asynqConc := flag.String("asynq-concurrency", "8,20,100", "asynq Config.Concurrency values to try")
	asynqEnqueuers := flag.Int("asynq-enqueuers", 32, "asynq: concurrent Enqueue calls in the bulk enqueue")
	asynqServers := flag.Int("asynq-servers", 4, "asynq: asynq.Servers the concurrency is split over (each dequeues serially)")
	asynqCheck := flag.Duration("asynq-check-interval", time.Second, "asynq: Config.TaskCheckInterval (asynq's default: 1s)")
	asynqShort := flag.Duration("asynq-delayed-check-short", 10*time.Millisecond, "asynq: the short Config.DelayedTaskCheckInterval the lateness is also measured with (asynq's default: 5s)")
	appendfsync := flag.String("redis-appendfsync", "everysec", "redis-server --appendfsync: always, everysec or no")

	riverConc := flag.String("river-concurrency", "500,2000,5000", "river QueueConfig.MaxWorkers values to try")
	riverBatch := flag.Int("river-batch", 1000, "river: jobs per InsertManyFast")
	riverEnqueuers := flag.Int("river-enqueuers", 2, "river: concurrent InsertManyFast calls")
	riverCool := flag.Duration("river-fetch-cooldown", 10*time.Millisecond, "river: Config.FetchCooldown (River's default: 100ms)")
	riverPoll := flag.Duration("river-fetch-poll-interval", time.Second, "river: Config.FetchPollInterval (River's default: 1s)")
	riverPollShort := flag.Duration("river-fetch-poll-short", 10*time.Millisecond, "river: the short Config.FetchPollInterval the scheduled-job lateness is also measured with (River's minimum: 1ms)")
	riverClients := flag.Int("river-clients", 1, "river: river.Clients the workers are split over")
	riverConns := flag.Int("river-pool-conns", 16, "river: pgxpool MaxConns")
	pgBin := flag.String("pg-bin", "", "PostgreSQL's bin directory (default: the newest /usr/lib/postgresql/*/bin)")
	pgSync := flag.String("pg-synchronous-commit", "off", "PostgreSQL synchronous_commit")
	flag.Parse()

	cfg.systems = strings.Split(*systems, ",")
	var err error
	if cfg.late.waiting, err = parseWaiting(*waiting); err != nil {
		fatalf("-scheduled: %v", err)
	}
	cfg.late.horizon = time.Hour
	all := map[string]system{}
	for name, list := range map[string]string{"usher": *usherConc, "usher-redis": *usherConc, "asynq": *asynqConc, "river": *riverConc} {
		c, err := parseInts(list)
		if err != nil {
			fatalf("-%s-concurrency: %v", name, err)
		}
		cfg.conc[name] = c
	}
	all["usher"] = newUsherSystem(*usherBin, *usherBatch, *usherEnqueuers, *usherAgents)
	multi := newUsherSystem(*usherBin, *usherBatch, *usherEnqueuers, *usherAgents)
	multi.appendfsync = *appendfsync // the same Redis settings as asynq's
	all["usher-redis"] = multi
	all["asynq"] = &asynqSystem{appendfsync: *appendfsync, enqueuers: *asynqEnqueuers, checkInterval: *asynqCheck, servers: *asynqServers, shortCheck: *asynqShort}
	all["river"] = &riverSystem{
		pgBin: *pgBin, pgSettings: []string{"fsync=on", "synchronous_commit=" + *pgSync, "full_page_writes=on", "max_connections=200"},
		batch: *riverBatch, enqueuers: *riverEnqueuers, poolConns: int32(*riverConns),
		fetchCool: *riverCool, fetchPoll: *riverPoll, pollShort: *riverPollShort, maxAttempts: 1, clients: *riverClients, logger: quietLogger(),
	}
	var names []string
	for _, name := range cfg.systems {
		name = strings.TrimSpace(name)
		if all[name] == nil {
			fatalf("-systems: unknown system %q (usher, usher-redis, asynq, river)", name)
		}
		names = append(names, name)
	}
	cfg.systems = names

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg, all)
	if err != nil {
		fatalf("%v", err)
	}
	if cfg.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print(os.Stdout)
	}
	if msg := rep.lateErrors(); msg != "" {
		fatalf("scheduled-job lateness not measured: %s", msg)
	}
}

// run sets every system up, measures, and tears everything down.
func run(ctx context.Context, cfg config, all map[string]system) (*report, error) {
	rep := newReport(cfg)
	var dirs []string
	defer func() {
		for _, name := range cfg.systems {
			all[name].close()
		}
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}()
	for _, name := range cfg.systems {
		dir, err := os.MkdirTemp("", "jobsbench-"+name+"-")
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
		progress("%s: starting", name)
		if err := all[name].setup(ctx, dir); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	byName := map[string]*systemReport{}
	for _, name := range cfg.systems {
		sr := &systemReport{Name: name, description: all[name].describe()}
		rep.Systems = append(rep.Systems, sr)
		byName[name] = sr
	}

	// The sweep: processing at each concurrency; the best is kept.
	for _, name := range cfg.systems {
		sr := byName[name]
		list := cfg.conc[name]
		if len(list) == 1 {
			sr.Best = list[0]
			continue
		}
		for _, c := range list {
			r, err := measureProcess(ctx, all[name], cfg.n, c, cfg.timeout)
			if err != nil {
				return nil, fmt.Errorf("%s sweep, concurrency %d: %w", name, c, err)
			}
			progress("%s: sweep c=%d: enqueue %.0f/s, processing %.0f/s", name, c, r.Enqueue, r.Process)
			sr.Sweep = append(sr.Sweep, r)
			if sr.Best == 0 || r.Process > sr.bestSweep().Process {
				sr.Best = c
			}
		}
	}

	// The runs at the best concurrency, the systems taking turns.
	for run := range cfg.runs {
		for i := range cfg.systems {
			name := cfg.systems[(run+i)%len(cfg.systems)]
			sr := byName[name]
			p, err := measureProcess(ctx, all[name], cfg.n, sr.Best, cfg.timeout)
			if err != nil {
				return nil, fmt.Errorf("%s run %d, processing: %w", name, run+1, err)
			}
			sr.Process = append(sr.Process, p)
			e, err := measureE2E(ctx, all[name], cfg.n, sr.Best, cfg.settle, cfg.timeout)
			if err != nil {
				return nil, fmt.Errorf("%s run %d, end to end: %w", name, run+1, err)
			}
			sr.E2E = append(sr.E2E, e)
			progress("%s: run %d c=%d: enqueue %.0f/s, processing %.0f/s, end to end %.0f/s",
				name, run+1, sr.Best, p.Enqueue, p.Process, e.Rate)
		}
	}

	// Pickup latency on the idle system.
	for _, name := range cfg.systems {
		if cfg.pickups == 0 {
			break
		}
		sr := byName[name]
		lat, err := measurePickup(ctx, all[name], sr.Best, cfg.pickups, cfg.pickupGap, 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("%s pickup: %w", name, err)
		}
		sr.setPickups(lat)
		progress("%s: pickup median %.1f ms, p90 %.1f ms", name, sr.PickupMedian, sr.PickupP90)
	}

	// Scheduled-job lateness on the idle system, with jobs waiting.
	for _, name := range cfg.systems {
		if cfg.late.probes == 0 {
			break
		}
		sr := byName[name]
		n := cfg.late.waitingFor(name)
		progress("%s: scheduled-job lateness, %d jobs waiting, %d probes", name, n, cfg.late.probes)
		lr := measureLateness(ctx, all[name], cfg.late, n, sr.Best)
		sr.Late = &lr
		if lr.Error != "" {
			progress("%s: ERROR: %s", name, lr.Error)
		}
	}
	rep.finish()
	return rep, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// moduleVersion is the version of a module in the binary's build info.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Version + " (replaced by " + m.Replace.Path + ")"
			}
			return m.Version
		}
	}
	return "?"
}

// cpuModel is the first model name in /proc/cpuinfo.
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s jobsbench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "jobsbench: "+format+"\n", args...)
	os.Exit(1)
}
