package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/jobsrole"
	"github.com/usherhq/usher/internal/redisq/scheduler"
	"github.com/usherhq/usher/internal/sched"
)

// schedulerOptions are the flags of `usher scheduler`.
type schedulerOptions struct {
	redisURL, prefix, node string
	mediumLimit, slowLimit int
	logLevel               slog.Level

	// Generic jobs: /v1 served by the leader.
	listen, advertise          string
	jobTiers                   string
	agentLease                 time.Duration
	keyRetention               time.Duration
	maxBody                    byteSize
	adminToken, adminTokenFile string
}

func newSchedulerCommand() *cobra.Command {
	o := schedulerOptions{jobTiers: "fast=1m,medium=10m@50%,slow=1h@25%", maxBody: 32 << 20}
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the Redis mode's scheduler (one leads, the others stand by)",
		Long: `scheduler is the "Scheduler server" of usher's Redis mode
(docs/redis.md): it campaigns for a lease in Redis; the node that holds it
rebuilds the scheduling core from Redis and decides for every queue server
and backend of the deployment (tiers, downgrades, halts, interactive
denials, queue estimates), while the others stand by and take over within
5 s when it dies. On SIGINT or SIGTERM it gives the lease up.

The leader also runs the generic jobs of /v1 (queues, jobs, workflows,
agents) from their Redis store and serves them on --listen; it publishes
--advertise in Redis, and every 'usher serve --redis' passes /v1 to it.
On first start an admin token is written to --admin-token-file.

While it leads it writes the deployment's dashboard to Redis every second,
which every queue server's /dashboard shows; --listen also answers
/metrics (the core's and the generic jobs' metrics while it leads).`,
		Example: `  # two schedulers on one Redis: one leads, the other stands by
  usher scheduler --redis redis://redis:6379 --node sched-a
  usher scheduler --redis redis://redis:6379 --node sched-b

  # on a Redis Cluster, with limits of 2 medium and 1 slow task
  usher scheduler --redis 'redis://r1:6379?cluster=true&addr=r2:6379&addr=r3:6379' \
    --medium-limit 2 --slow-limit 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.redisURL, "redis", "", "Redis URL: redis://host:port, ?cluster=true&addr=… or ?master=NAME&addr=… (required)")
	f.StringVar(&o.prefix, "redis-prefix", redisq.DefaultPrefix, "prefix of every key (a hash tag keeps them in one Cluster slot)")
	f.StringVar(&o.node, "node", redisq.DefaultNode(), "this node's name in the leader's token")
	f.IntVar(&o.mediumLimit, "medium-limit", 0, "most medium-or-slow tasks running at once (0: half the backends, rounded up)")
	f.IntVar(&o.slowLimit, "slow-limit", 0, "most slow tasks running at once (0: a quarter of the backends, rounded up)")
	f.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8090", "where the leader serves /v1 for the queue servers; /metrics too")
	f.StringVar(&o.advertise, "advertise", "", "host:port the queue servers reach --listen at (default: the listen address)")
	f.StringVar(&o.jobTiers, "job-tiers", o.jobTiers, "duration tiers of generic jobs, fastest first: name=duration[@limit|@share%],...")
	f.DurationVar(&o.agentLease, "agent-lease", 30*time.Second, "how long an agent's lease lasts after each call")
	f.DurationVar(&o.keyRetention, "idempotency-key-retention", jobs.DefaultKeyRetention, "how long an idempotency key (a job's or a request's) is kept after its enqueue")
	f.Var(&o.maxBody, "max-body", "largest /v1 request body")
	f.StringVar(&o.adminToken, "admin-token", "", "make this string an admin token of /v1 (at least 16 characters)")
	f.StringVar(&o.adminTokenFile, "admin-token-file", "usher-admin.token", "where a new admin token is written when none exists")
	envFallback(cmd, "USHER_SCHEDULER_")
	return cmd
}

func (o *schedulerOptions) run(ctx context.Context, cmd *cobra.Command) error {
	if o.redisURL == "" {
		return fmt.Errorf("scheduler: --redis is required")
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: o.logLevel}))
	rdb, err := redisq.Open(ctx, o.redisURL, 0)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	defer rdb.Close()
	tracer, stopTracing, err := startTracing(ctx, "usher-scheduler")
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	defer stopTracing()
	reg := prometheus.NewRegistry()
	obs := jobsapi.NewObserver()
	reg.MustRegister(obs) // its series stay at their totals while this node stands by
	jobsRole, ln, err := o.jobsRole(ctx, rdb, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), obs, log, tracer)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	defer ln.Close()
	s, err := scheduler.New(scheduler.Config{Client: rdb, Prefix: o.prefix, Node: o.node,
		Tiers: asyqueue.Tiers(o.mediumLimit, o.slowLimit), Logger: log,
		WhileLeading: jobsRole.WhileLeading, JobsStats: jobsRole.Stats})
	if err != nil {
		return err
	}
	registerSchedulerMetrics(reg, s, jobsRole)
	served := make(chan error, 1)
	go func() { served <- jobsRole.Serve(ctx) }()
	log.Info("scheduler: /v1 listening", "addr", ln.Addr().String())
	if err := s.Run(ctx); err != nil {
		return err
	}
	if err := <-served; err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	return s.Resign(rctx)
}

// registerSchedulerMetrics makes what `usher scheduler` exports at
// /metrics on --listen: while it leads, the scheduling core's usher_asy_*
// gauges and counters and the generic jobs' usher_jobs_* (the queue
// servers export neither in multi-node mode); always usher_scheduler_leading
// and the Go runtime's and the process's metrics.
func registerSchedulerMetrics(reg *prometheus.Registry, s *scheduler.Scheduler, role *jobsrole.Role) {
	snapshot := func() (sched.Snapshot, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		snap, err := s.CoreSnapshot(ctx)
		return snap, err == nil
	}
	leading := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "usher_scheduler_leading",
		Help: "1 while this scheduler leads, 0 while it stands by."}, func() float64 {
		if s.Leading() {
			return 1
		}
		return 0
	})
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		asyqueue.NewCoreCollector(snapshot), jobsapi.NewCollectorFunc(role.Stats), leading)
}

// jobsRole opens the listener of /v1 and the role that serves it while
// this node leads; metrics answers /metrics there.
func (o *schedulerOptions) jobsRole(ctx context.Context, rdb redis.UniversalClient, metrics http.Handler, obs jobs.Observer, log *slog.Logger, tracer trace.Tracer) (*jobsrole.Role, net.Listener, error) {
	tiers, err := jobs.ParseTiers(o.jobTiers)
	if err != nil {
		return nil, nil, fmt.Errorf("--job-tiers: %w", err)
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, nil, err
	}
	advertise := o.advertise
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if host, _, err := net.SplitHostPort(advertise); err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
		ln.Close()
		return nil, nil, fmt.Errorf("--advertise %q: the queue servers need a host they can reach (set --advertise)", advertise)
	}
	role, err := jobsrole.New(ctx, jobsrole.Config{
		Client: rdb, Keys: redisq.NewKeys(o.prefix), Listener: ln, Advertise: "http://" + advertise,
		Tiers: tiers, LeaseTTL: o.agentLease, KeyRetention: o.keyRetention, MaxBody: int64(o.maxBody),
		AdminToken: o.adminToken, AdminTokenFile: o.adminTokenFile, Logger: log, Metrics: metrics,
		Observer: obs, Tracer: tracer,
	})
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return role, ln, nil
}
