package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/frontend"
	"github.com/usherhq/usher/internal/renderapi"
	"github.com/usherhq/usher/internal/resultcache"
	"github.com/usherhq/usher/internal/shares"
	"github.com/usherhq/usher/internal/tokens"
	"github.com/usherhq/usher/internal/uploads"
)

// multiNode is a queue server of multi-node mode: /asy hands tasks to
// Redis for the elected scheduler and the backends registered there, /v1
// goes to the leading scheduler, and the dashboard is the one it publishes
// (docs/redis.md). No backend or jobs engine runs here; logins and the
// admin token are checked against the tokens the schedulers keep in Redis.
type multiNode struct {
	rdb    redis.UniversalClient
	keys   redisq.Keys
	q      *frontend.Queue
	leader *leaderProxy
	dash   *remoteDashboard
	toks   *tokens.Store
	counts *dashboard.Tally // handed on to Redis for the leader's history
	log    *slog.Logger
}

// openMultiNode connects to multi-node mode's Redis.
func openMultiNode(ctx context.Context, cfg Config) (*multiNode, error) {
	if err := cfg.checkMultiNode(); err != nil {
		return nil, err
	}
	prefix := cfg.Redis.Prefix
	if prefix == "" {
		prefix = redisq.DefaultPrefix
	}
	caps := cfg.Caps.WithDefaults()
	// Each waiting task blocks one connection in BLPOP (docs/redis.md).
	pool := max(caps.MaxQueued, asyqueue.DefaultMaxQueued) + 64
	rdb, err := redisq.Open(ctx, cfg.Redis.URL, pool)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	keys := redisq.NewKeys(prefix)
	return &multiNode{
		rdb:    rdb,
		keys:   keys,
		toks:   tokens.OpenRedis(rdb, keys.Prefix(), 0, cfg.Logger),
		leader: newLeaderProxy(rdb, keys.SchedulerAPI(), cfg.Logger),
		dash:   newRemoteDashboard(rdb, keys, cfg.dashEvery/2, cfg.Logger),
		counts: dashboard.NewTally(dashboard.SampleEvery, nil),
		log:    cfg.Logger,
		q: frontend.New(ctx, rdb, frontend.Config{Keys: keys, Tiers: cfg.tiers(), Node: cfg.Redis.Node,
			Caps: caps, Logger: cfg.Logger}),
	}, nil
}

// checkMultiNode refuses settings that a queue server of multi-node mode
// would ignore: its tasks run on the backends registered in Redis, and
// /v1 with its tokens belongs to the leading scheduler.
func (c *Config) checkMultiNode() error {
	if c.LocalBackends > 0 || len(c.RemoteBackends) > 0 {
		return errors.New("with Redis the backends register there (usher backend --redis): give no local or remote backends")
	}
	if c.Jobs.AdminToken != "" || c.Jobs.AdminTokenFile != "" {
		return errors.New("with Redis the /v1 tokens live there and the leading scheduler serves /v1: give --admin-token or --admin-token-file to usher scheduler")
	}
	return nil
}

// stores keeps shares, the result cache and the recent uploads in Redis,
// under the queue servers' prefix, so that every queue server sees the
// same (docs/redis.md, "What queue servers share"). The SQLite file holds
// none of them in this mode.
func (m *multiNode) stores(ctx context.Context, _ *sql.DB, cfg Config, shareCfg shares.Config) (stores, error) {
	st := stores{
		shares:  shares.NewRedis(m.rdb, m.keys, shareCfg),
		uploads: uploads.NewRedis(m.rdb, m.keys, uploads.Config{MaxBytes: cfg.UploadBytes, Now: cfg.now}, cfg.Logger),

		renderSources: renderapi.NewRedisSources(m.rdb, m.keys, cfg.Render.SourceRetention),
	}
	if cfg.CacheBytes > 0 {
		cache, err := resultcache.NewRedis(m.rdb, m.keys, cfg.CacheBytes, cfg.now)
		if err != nil {
			return stores{}, err
		}
		st.cache = cache
	}
	if info, err := m.rdb.Info(ctx, "persistence").Result(); err == nil && !redisPersists(info) {
		cfg.Logger.Warn("Redis writes no append-only file: shares made since its last snapshot are lost if it restarts (docs/redis.md, \"What queue servers share\")")
	}
	return st, nil
}

func (m *multiNode) queue() asyqueue.Queue           { return m.q }
func (m *multiNode) snapshots() *asyqueue.Dispatcher { return nil }
func (m *multiNode) v1() http.Handler                { return m.leader }
func (m *multiNode) drain()                          {}
func (m *multiNode) tokens() *tokens.Store           { return m.toks }
func (m *multiNode) close()                          { m.rdb.Close() }
func (m *multiNode) tally() *dashboard.Tally         { return m.counts }

// start hands the sessions' counts on to Redis once a second.
func (m *multiNode) start(ctx context.Context) error {
	go redisq.HandOnCounts(ctx, m.rdb, m.keys, m.counts, time.Second, m.log)
	return nil
}

func (m *multiNode) dashboard(ctx context.Context) (dashboard.Dashboard, error) {
	return m.dash.get(ctx), nil
}
