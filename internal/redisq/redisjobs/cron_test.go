package redisjobs

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/testclock"
	"github.com/usherhq/usher/jobtype"
)

// A periodic job's tick makes exactly one job across leader changes:
// when the old leader wrote the tick before losing the lead, the new
// leader (loading lastAt) does not make it again; when the old leader
// lost the lead right at the tick, its write is fenced and the new
// leader makes the tick's job.
func TestCronTickAcrossFailover(t *testing.T) { onSingleAndCluster(t, testCronFailover) }

func testCronFailover(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	keys := redisq.NewKeys(redisq.DefaultPrefix)
	at := func(h int) time.Time { return time.Date(2026, 1, 5, h, 0, 0, 0, time.UTC) }
	clock := testclock.New(at(10).Add(-time.Minute))
	leader := func(token string) *jobs.Engine {
		t.Helper()
		lead(t, rdb, keys, token)
		s := New(rdb, keys.Prefix(), Fence{Token: token}, nil)
		t.Cleanup(func() { s.Close() })
		e, err := jobs.Open(ctx, jobs.Config{Store: s, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	ticks := func(e *jobs.Engine) []time.Time {
		t.Helper()
		list, err := e.Jobs(ctx, jobs.Filter{Queue: "q", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var out []time.Time
		for _, j := range list {
			out = append(out, j.CreatedAt)
		}
		return out
	}
	a := leader("1:a")
	if _, err := a.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateCron(ctx, jobtype.CronSpec{Name: "hourly", Spec: "0 * * * *", Queue: "q"}); err != nil {
		t.Fatal(err)
	}

	// 10:00: the leader makes the tick's job, then loses the lead.
	clock.Advance(time.Minute)
	if err := a.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	b := leader("2:b")
	if err := b.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ticks(b); len(got) != 1 || !got[0].Equal(at(10)) {
		t.Fatalf("after a failover past 10:00 the jobs were made at %v; want one, at 10:00", got)
	}

	// 11:00: the lead passes on right at the tick, before the leader
	// writes it: its write is refused, and the new leader makes the job.
	clock.Advance(time.Hour)
	c := leader("3:c")
	if err := b.Tick(ctx); err == nil {
		t.Fatal("a fenced leader's tick was written")
	}
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ticks(c); len(got) != 2 || !got[1].Equal(at(11)) {
		t.Fatalf("after a failover at 11:00 the jobs were made at %v; want two, the second at 11:00", got)
	}
	cr, err := c.Cron("hourly")
	if err != nil || cr.LastAt == nil || !cr.LastAt.Equal(at(11)) || !cr.NextAt.Equal(at(12)) {
		t.Fatalf("the entry after the failovers: %+v %v; want lastAt 11:00, nextAt 12:00", cr, err)
	}
}
