package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/scheduler"
)

// schedulerOptions are the flags of `usher scheduler`.
type schedulerOptions struct {
	redisURL, prefix, node string
	mediumLimit, slowLimit int
	logLevel               slog.Level
}

func newSchedulerCommand() *cobra.Command {
	o := schedulerOptions{}
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the Redis mode's scheduler (one leads, the others stand by)",
		Long: `scheduler is seed 000's "Scheduler server" of usher's Redis mode
(docs/redis.md): it campaigns for a lease in Redis; the node that holds it
rebuilds the scheduling core from Redis and decides for every queue server
and backend of the deployment (tiers, downgrades, halts, interactive
denials, queue estimates), while the others stand by and take over within
5 s when it dies. On SIGINT or SIGTERM it gives the lease up.`,
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
	s, err := scheduler.New(scheduler.Config{Client: rdb, Prefix: o.prefix, Node: o.node,
		Tiers: asyqueue.Tiers(o.mediumLimit, o.slowLimit), Logger: log})
	if err != nil {
		return err
	}
	if err := s.Run(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	return s.Resign(rctx)
}
