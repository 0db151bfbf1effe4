package service

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usherhq/usher/internal/asyqueue"
	"github.com/usherhq/usher/internal/renderapi"
	"github.com/usherhq/usher/internal/resultcache"
	"github.com/usherhq/usher/internal/shares"
	"github.com/usherhq/usher/internal/uploads"
)

// stores are what a user reaches through any queue server: shares, the
// result cache, the recent uploads that `restore` reads and the sources
// behind the render API's permanent URLs. The embedded
// default keeps them in the SQLite file and in memory; multi-node mode in
// Redis, so that every queue server sees the same (docs/redis.md, "What
// queue servers share").
type stores struct {
	shares  shares.Store
	cache   asyqueue.ResultCache // nil: no result cache
	uploads asyqueue.UploadStore
	// renderSources keep what a render API id was made from, so that an
	// evicted result is computed again.
	renderSources renderapi.Sources
}

// DefaultShareBytes is the most content one shared project holds unless
// configured.
const DefaultShareBytes = 256 << 10

// sharePruneEvery is how often shares past their retention are removed
// (a share is also refused to readers at once when it expires).
const sharePruneEvery = time.Hour

// shareConfig is the shares' rules from the configuration.
func (s *Service) shareConfig() shares.Config {
	maxBytes := s.cfg.ShareBytes
	if maxBytes <= 0 {
		maxBytes = DefaultShareBytes
	}
	return shares.Config{MaxFiles: s.queueCfg.MaxFiles, MaxBytes: maxBytes, Retention: s.cfg.ShareRetention,
		Quota: s.cfg.ShareQuota, Now: s.cfg.now}
}

// openLocalStores opens the embedded default's stores: shares, the result
// cache and the render sources in the SQLite file, uploads in memory.
func openLocalStores(ctx context.Context, db *sql.DB, cfg Config, shareCfg shares.Config) (stores, error) {
	var st stores
	var err error
	if cfg.CacheBytes > 0 {
		if st.cache, err = resultcache.Open(ctx, db, cfg.CacheBytes, cfg.now); err != nil {
			return stores{}, err
		}
	}
	if st.shares, err = shares.OpenSQLite(ctx, db, shareCfg); err != nil {
		return stores{}, err
	}
	st.uploads = uploads.New(uploads.Config{MaxBytes: cfg.UploadBytes, Now: cfg.now})
	if st.renderSources, err = renderapi.OpenSQLiteSources(ctx, db, cfg.Render.SourceBytes); err != nil {
		return stores{}, err
	}
	return st, nil
}

// pruneShares removes expired shares every sharePruneEvery until ctx ends.
func (s *Service) pruneShares(ctx context.Context) {
	t := time.NewTicker(sharePruneEvery)
	defer t.Stop()
	for {
		n, err := s.shares.Prune(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.cfg.Logger.Warn("shares: prune failed", "err", err)
		case n > 0:
			s.cfg.Logger.Info("shares: expired", "count", n, "retention", shares.Days(s.cfg.ShareRetention))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// shareCollector exports the shares' usage at each scrape, so that an
// operator sees the quota coming (in multi-node mode every queue server
// reports the deployment's shares).
type shareCollector struct {
	store             shares.Store
	quota             int64
	count, bytes, max *prometheus.Desc
}

func newShareCollector(store shares.Store, quota int64) *shareCollector {
	return &shareCollector{store: store, quota: quota,
		count: prometheus.NewDesc("usher_shares", "Shares kept.", nil, nil),
		bytes: prometheus.NewDesc("usher_shares_bytes", "Stored bytes of all kept shares.", nil, nil),
		max:   prometheus.NewDesc("usher_shares_quota_bytes", "The shares' quota (0: none).", nil, nil),
	}
}

// Describe sends the metrics' descriptions.
func (c *shareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.bytes
	ch <- c.max
}

// Collect reads the shares' usage (nothing but the quota when the store
// cannot be read).
func (c *shareCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(c.quota))
	n, bytes, err := c.store.Usage(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(bytes))
}

// redisPersists reads INFO persistence: whether Redis writes an
// append-only file (what shares in Redis need to survive its restart).
func redisPersists(info string) bool {
	return strings.Contains(info, "aof_enabled:1")
}
