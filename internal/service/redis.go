package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/frontend"
)

// openRedis connects to multi-node mode's Redis and returns the queue the
// /asy server submits to.
func (s *Service) openRedis(ctx context.Context) (*frontend.Queue, error) {
	rc := s.cfg.Redis
	prefix := rc.Prefix
	if prefix == "" {
		prefix = redisq.DefaultPrefix
	}
	dc := s.cfg.Dispatcher
	// Each waiting task blocks one connection in BLPOP (docs/redis.md).
	pool := max(dc.MaxQueued, 1000) + 64
	rdb, err := redisq.Open(ctx, rc.URL, pool)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s.redis = rdb
	s.leader = newLeaderProxy(rdb, redisq.NewKeys(prefix).SchedulerAPI(), s.cfg.Logger)
	s.remoteDash = newRemoteDashboard(rdb, redisq.NewKeys(prefix), s.cfg.dashEvery/2, s.cfg.Logger)
	return frontend.New(ctx, rdb, frontend.Config{
		Keys: redisq.NewKeys(prefix), Tiers: asyqueue.Tiers(s.cfg.MediumLimit, s.cfg.SlowLimit), Node: rc.Node,
		MaxQueued: dc.MaxQueued, MaxQueuedPerClient: dc.MaxQueuedPerClient, Logger: s.cfg.Logger,
	}), nil
}

// checkRedisMode refuses settings that a queue server of multi-node mode
// would ignore: its tasks run on the backends registered in Redis, and
// /v1 with its tokens belongs to the leading scheduler.
func (c *Config) checkRedisMode() error {
	if c.Redis.URL == "" {
		return nil
	}
	if c.LocalBackends > 0 || len(c.RemoteBackends) > 0 {
		return errors.New("with Redis the backends register there (usher backend --redis): give no local or remote backends")
	}
	if c.Jobs.AdminToken != "" || c.Jobs.AdminTokenFile != "" {
		return errors.New("with Redis the /v1 tokens live there and the leading scheduler serves /v1: give --admin-token or --admin-token-file to usher scheduler")
	}
	return nil
}
