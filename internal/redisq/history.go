package redisq

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/dashboard"
)

// CountsTTL is how long an interval's counts stay in Redis: long past the
// moment the leading scheduler samples them (dashboard.SampleSettle after
// the interval), so that a late or absent leader does not leave them for
// ever.
const CountsTTL = 10 * time.Minute

// AddCounts adds counts by interval to scheduler.dashboard.counts:I, in one
// pipeline.
func AddCounts(ctx context.Context, rdb redis.UniversalClient, keys Keys, counts map[int64]dashboard.Counts) error {
	if len(counts) == 0 {
		return nil
	}
	pipe := rdb.Pipeline()
	for i, c := range counts {
		key := keys.DashboardCounts(i)
		for f, n := range c.Fields() {
			pipe.HIncrBy(ctx, key, f, n)
		}
		pipe.PExpire(ctx, key, CountsTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("add the dashboard's counts: %w", err)
	}
	return nil
}

// HandOnCounts moves the tally's counts to Redis every `every` until ctx
// ends (a queue server of multi-node mode, for the leader's samples). Counts
// that cannot be written are kept for the next try; a failure is logged
// once per streak.
func HandOnCounts(ctx context.Context, rdb redis.UniversalClient, keys Keys, tally *dashboard.Tally, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		counts := tally.TakeAll()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := AddCounts(wctx, rdb, keys, counts)
		cancel()
		switch {
		case err == nil && failing:
			log.Info("handing on the dashboard's counts works again")
			failing = false
		case err != nil:
			tally.Restore(counts)
			tally.Forget(dashboard.IntervalOf(time.Now().Add(-CountsTTL), dashboard.SampleEvery))
			if !failing {
				log.Warn("cannot hand on the dashboard's counts; retrying", "err", err)
			}
			failing = true
		}
	}
}

// ReadCounts reads one interval's counts and deletes them (their sample
// takes them).
func ReadCounts(ctx context.Context, rdb redis.UniversalClient, keys Keys, interval int64) (dashboard.Counts, error) {
	key := keys.DashboardCounts(interval)
	f, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return dashboard.Counts{}, fmt.Errorf("read %s: %w", key, err)
	}
	c, err := dashboard.CountsOfFields(f)
	if err != nil {
		return dashboard.Counts{}, fmt.Errorf("read %s: %w", key, err)
	}
	return c, nil
}

// ParseHistory reads scheduler.dashboard.history's items, oldest first,
// skipping any that is not a sample (and saying how many it skipped).
func ParseHistory(items []string) ([]dashboard.Sample, int) {
	out := make([]dashboard.Sample, 0, len(items))
	bad := 0
	for _, it := range items {
		s, err := dashboard.ParseSample([]byte(it))
		if err != nil {
			bad++
			continue
		}
		out = append(out, s)
	}
	return out, bad
}
