package service

import (
	"context"
	"fmt"
	"net/http"

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
	return frontend.New(ctx, rdb, frontend.Config{
		Keys: redisq.NewKeys(prefix), Tiers: tiers(s.cfg.MediumLimit, s.cfg.SlowLimit), Node: rc.Node,
		MaxQueued: dc.MaxQueued, MaxQueuedPerClient: dc.MaxQueuedPerClient, Logger: s.cfg.Logger,
	}), nil
}

// jobsNotInRedisMode answers /v1 on a queue server of multi-node mode,
// which serves /asy only for now: generic jobs need the single-node
// server (docs/redis.md, "What multi-node mode serves").
func jobsNotInRedisMode(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotImplemented)
	fmt.Fprintln(w, `{"error":"generic jobs (/v1) are not served in Redis mode; run them on a single-node usher serve"}`)
}
