package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/redisq"
)

// Why a queue server in multi-node mode shows no leader's dashboard.
const (
	noLeaderText    = "no scheduler leads: nothing is scheduled until one does (usher scheduler --redis)"
	notYetText      = "the leading scheduler has not published its dashboard yet"
	unreadableText  = "the leading scheduler's dashboard cannot be read (see this queue server's log)"
	unreachableText = "Redis cannot be reached"
)

// remoteDashboard reads the dashboard the leading scheduler publishes in
// scheduler.dashboard (multi-node mode), for /api/dashboard.
type remoteDashboard struct {
	rdb  redis.UniversalClient
	keys redisq.Keys
	log  *slog.Logger
	// every bounds how often it reads Redis, however many dashboards are
	// open: half the time between snapshots.
	every time.Duration

	mu      sync.Mutex
	readAt  time.Time
	last    dashboard.Dashboard
	bad     string          // the last problem logged as a warning, to log it once
	history *dashboard.Ring // scheduler.dashboard.history as last read
	newest  string          // its last item as last read
}

func newRemoteDashboard(rdb redis.UniversalClient, keys redisq.Keys, every time.Duration, log *slog.Logger) *remoteDashboard {
	return &remoteDashboard{rdb: rdb, keys: keys, log: log, every: every, history: dashboard.NewRing()}
}

// get returns the leader's dashboard, read at most every r.every;
// concurrent callers share one read.
func (r *remoteDashboard) get(ctx context.Context) dashboard.Dashboard {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.readAt.IsZero() && time.Since(r.readAt) < r.every {
		return r.last
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r.last, r.readAt = r.read(ctx), time.Now()
	return r.last
}

// read reads the lease, the document and the newest sample of the history
// in one pipeline. It shows the document only when the leader that wrote
// it holds the lease now; else, or when the value is not a dashboard, a
// state that says why. The history comes with either: it outlives its
// leader.
func (r *remoteDashboard) read(ctx context.Context) dashboard.Dashboard {
	pipe := r.rdb.Pipeline()
	lease := pipe.Get(ctx, r.keys.Leader())
	doc := pipe.Get(ctx, r.keys.Dashboard())
	newest := pipe.LIndex(ctx, r.keys.DashboardHistory(), -1)
	_, _ = pipe.Exec(ctx) // each command's error is its own
	d := r.readDoc(lease, doc)
	r.readHistory(ctx, newest)
	d.History = r.history.History()
	return d
}

// readHistory brings the history up to date: the newest sample alone when
// it follows the one held, the whole list when anything else changed.
func (r *remoteDashboard) readHistory(ctx context.Context, newest *redis.StringCmd) {
	raw, err := newest.Result()
	switch {
	case errors.Is(err, redis.Nil):
		r.history.Replace(nil)
		r.newest = ""
		return
	case err != nil:
		return // unreachable: the document's state says so; keep what is held
	}
	if raw == r.newest {
		return // nothing new (or the same foreign item, already reported)
	}
	r.newest = raw
	s, err := dashboard.ParseSample([]byte(raw))
	held := r.history.Newest()
	switch {
	case err == nil && s.T == held:
		return
	case err == nil && held != 0 && s.T == held+dashboard.SampleEvery.Milliseconds():
		r.history.Add(s)
		return
	}
	items, err := r.rdb.LRange(ctx, r.keys.DashboardHistory(), 0, -1).Result()
	if err != nil {
		r.newest = "" // read it again next time
		r.warn("dashboard: cannot read scheduler.dashboard.history", err)
		return
	}
	samples, bad := redisq.ParseHistory(items)
	if bad > 0 {
		r.warn("dashboard: scheduler.dashboard.history holds items that are not samples; skipped", fmt.Errorf("%d of %d", bad, len(items)))
	}
	r.history.Replace(samples)
}

// readDoc is the dashboard of the lease and document read.
func (r *remoteDashboard) readDoc(lease, doc *redis.StringCmd) dashboard.Dashboard {
	token, err := lease.Result()
	switch {
	case errors.Is(err, redis.Nil):
		r.ok()
		return dashboard.Unavailable(time.Now(), nil, noLeaderText)
	case err != nil:
		r.warn("dashboard: cannot read scheduler.leader", err)
		return dashboard.Unavailable(time.Now(), nil, unreachableText)
	}
	leader := leaderOfToken(token)
	raw, err := doc.Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		r.ok()
		return dashboard.Unavailable(time.Now(), leader, notYetText)
	case err != nil:
		r.warn("dashboard: cannot read scheduler.dashboard", err)
		return dashboard.Unavailable(time.Now(), leader, unreadableText)
	}
	d, err := redisq.ParseDashboard(raw)
	if err != nil {
		r.warn("dashboard: scheduler.dashboard holds a foreign or malformed value; skipped", err)
		return dashboard.Unavailable(time.Now(), leader, unreadableText)
	}
	r.ok()
	if d.Leader.Token != token {
		return dashboard.Unavailable(time.Now(), leader, notYetText) // the last leader's, not yet replaced
	}
	return d
}

// warn logs a problem once, until it changes or reading works again.
func (r *remoteDashboard) warn(msg string, err error) {
	text := fmt.Sprintf("%s: %v", msg, err)
	if text == r.bad {
		r.log.Debug(msg, "err", err)
		return
	}
	r.bad = text
	r.log.Warn(msg, "err", err)
}

// ok notes that reading works.
func (r *remoteDashboard) ok() { r.bad = "" }

// leaderOfToken names the leader of a lease token (nil when the token is
// not EPOCH:NODE).
func leaderOfToken(token string) *dashboard.Leader {
	_, node, err := redisq.ParseToken(token)
	if err != nil {
		return nil
	}
	return &dashboard.Leader{Node: node, Token: token}
}
