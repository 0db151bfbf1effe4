package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/redisq"
)

// historyScript appends a sample to scheduler.dashboard.history while the
// token leads, keeps the newest ARGV[3], and deletes the interval's counts
// it took: KEYS leader, history, counts; ARGV token, sample, length.
var historyScript = redis.NewScript(fence + `
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
redis.call('DEL', KEYS[3])
return 1`)

// recordHistory looks at the load in st and writes the samples now due
// (docs/redis.md, "The dashboard"). A new leadership first reads the last
// sample written, so that it follows its predecessor's history.
func (l *leader) recordHistory(ctx context.Context, st dashboard.State) error {
	if l.sampler == nil {
		s := dashboard.NewSampler(dashboard.SampleEvery, dashboard.SampleSettle)
		last, err := l.s.rdb.LIndex(ctx, l.s.keys.DashboardHistory(), -1).Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return fmt.Errorf("history: read the last sample: %w", err)
		default:
			if prev, err := dashboard.ParseSample([]byte(last)); err == nil {
				s.Resume(prev.T)
			}
		}
		l.sampler = s
	}
	for _, i := range l.sampler.Look(st.Time, l.gauges(st)) {
		counts, err := redisq.ReadCounts(ctx, l.s.rdb, l.s.keys, i)
		if err != nil {
			l.s.log.Warn("dashboard counts unreadable; the sample shows none", "err", err)
		}
		sample := l.sampler.Close(i, counts)
		k := l.s.keys
		if _, err := runScript(ctx, l.s.rdb, historyScript, "append to the history",
			[]string{k.Leader(), k.DashboardHistory(), k.DashboardCounts(i)},
			l.token, sample.Encode(), dashboard.HistorySamples); err != nil {
			return err
		}
	}
	return nil
}

// gauges are the load the dashboard's history samples: running by tier
// from st, waiting by class from every task the leader holds (st lists at
// most maxDashboardQueue of them).
func (l *leader) gauges(st dashboard.State) dashboard.Gauges {
	g := dashboard.GaugesOf(st)
	for k := range g.Waiting {
		g.Waiting[k] = 0
	}
	for _, t := range l.tasks {
		if !t.running && t.class != "" {
			g.Waiting[t.class]++
		}
	}
	return g
}
