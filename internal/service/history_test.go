package service

import (
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/testclock"
	"github.com/usherhq/usher/internal/testwait"
)

// t0 begins an interval of the history.
var t0 = time.Unix(1_800_000_000, 0)

// hasSample says whether h holds a sample of the interval beginning at at.
func sampleAt(h *dashboard.History, at time.Time) *dashboard.Sample {
	if h == nil {
		return nil
	}
	for i := range h.Samples {
		if h.Samples[i].T == at.UnixMilli() {
			return &h.Samples[i]
		}
	}
	return nil
}

// Single-node mode samples its own queue server: a compile done and a
// denial in the interval, with the compile's time; a stream's first
// snapshot carries the whole history, later ones only what is new.
func TestSingleNodeHistory(t *testing.T) {
	clock := testclock.New(t0)
	ts := startService(t, 1, func(c *Config) { c.Dispatcher.Now = clock.Now; c.dashEvery = 100 * time.Millisecond })
	dash := openDashboard(t, ts)
	if doc, _, _ := dash.nextDoc(); doc.History == nil || len(doc.History.Samples) != 0 || doc.History.IntervalMS != 10000 {
		t.Fatalf("first history %+v", doc.History)
	}
	c := dial(t, ts.srv)
	c.compile(quickFigure, map[string]any{"timeout": 10000})
	if m := final(t, c.rest()); m.verb != "complete" {
		t.Fatalf("compile ended with %+v", m)
	}
	bad := dial(t, ts.srv)
	bad.send("options", map[string]any{"format": "gif"})
	final(t, bad.rest())
	clock.Advance(dashboard.SampleEvery)
	doc := dash.untilDoc("the first sample", func(d dashboard.Dashboard) bool { return sampleAt(d.History, t0) != nil })
	s := sampleAt(doc.History, t0)
	if s.Done != 1 || s.Failed != 0 || s.Denied != 1 || s.Denials["request"] != 1 || s.CacheMisses != 1 ||
		s.CompileMS == nil || s.WaitMS == nil || s.Running["medium"] > 1 || len(doc.History.Samples) != 1 {
		t.Fatalf("sample %+v", *s)
	}
	later, _, _ := dash.nextDoc()
	if len(later.History.Samples) != 0 {
		t.Fatalf("a later snapshot repeats %d samples", len(later.History.Samples))
	}
	clock.Advance(dashboard.SampleEvery)
	doc = dash.untilDoc("the second sample", func(d dashboard.Dashboard) bool { return len(d.History.Samples) > 0 })
	if len(doc.History.Samples) != 1 || doc.History.Samples[0].T != t0.Add(dashboard.SampleEvery).UnixMilli() || doc.History.Samples[0].Done != 0 {
		t.Fatalf("second snapshot with samples: %+v", doc.History.Samples)
	}
	fresh, _, _ := openDashboard(t, ts).nextDoc()
	if len(fresh.History.Samples) != 2 {
		t.Fatalf("a new stream's first snapshot has %d samples, want 2", len(fresh.History.Samples))
	}
}

// In multi-node mode a queue server hands its counts on to Redis, the
// leading scheduler samples them with the load it sees, and every queue
// server streams the history from Redis, also while no scheduler leads; a
// new leader continues its predecessor's history.
func TestMultiNodeHistory(t *testing.T) {
	f := startRedisFront(t)
	ctx := t.Context()
	bad := dial(t, f.srv)
	bad.send("options", map[string]any{"format": "gif"})
	final(t, bad.rest())
	testwait.Eventually(t, 10*time.Second, func() bool {
		keys, _ := f.rdb.Keys(ctx, f.keys.Prefix()+"scheduler.dashboard.counts:*").Result()
		for _, k := range keys {
			if f.rdb.HGet(ctx, k, "denied.request").Val() == "1" {
				return true
			}
		}
		return false
	}, "the queue server's denial handed on to Redis")

	clock := testclock.New(t0)
	i0 := dashboard.IntervalOf(t0, dashboard.SampleEvery)
	// What two queue servers counted in the leader's first interval.
	c := dashboard.Counts{Done: 2, CacheHits: 1}
	c.Compile.Add(400 * time.Millisecond)
	for range 2 {
		if err := redisq.AddCounts(ctx, f.rdb, f.keys, map[int64]dashboard.Counts{i0: c}); err != nil {
			t.Fatal(err)
		}
	}
	crash := f.startLeaderAt(t, "sched-a", clock.Now)
	dash := openDashboard(t, f.testService)
	dash.untilDoc("the leader's state", func(d dashboard.Dashboard) bool { return d.Leader != nil && d.NoData == "" })
	c1 := dial(t, f.srv)
	c1.compile(quickFigure, map[string]any{"timeout": 3000}) // no backend: it waits
	dash.untilDoc("a waiting task", func(d dashboard.Dashboard) bool { return len(d.Queue) == 1 })
	clock.Advance(dashboard.SampleEvery + dashboard.SampleSettle)
	doc := dash.untilDoc("the first sample", func(d dashboard.Dashboard) bool { return sampleAt(d.History, t0) != nil })
	s := sampleAt(doc.History, t0)
	if s.Done != 4 || s.CacheHits != 2 || s.CompileMS == nil || s.Waiting["fast"] != 1 {
		t.Fatalf("sample %+v", *s)
	}
	if n := f.rdb.Exists(ctx, f.keys.DashboardCounts(i0)).Val(); n != 0 {
		t.Fatal("the sampled counts are still in Redis")
	}

	crash()
	doc = dash.untilDoc("no leader", func(d dashboard.Dashboard) bool { return d.NoData == noLeaderText })
	if first, _, _ := openDashboard(t, f.testService).nextDoc(); sampleAt(first.History, t0) == nil {
		t.Fatalf("without a leader a new stream has no history: %+v", first.History)
	}
	f.startLeaderAt(t, "sched-b", clock.Now)
	dash.untilDoc("b leads", func(d dashboard.Dashboard) bool {
		return d.Leader != nil && d.Leader.Node == "sched-b" && d.NoData == ""
	})
	clock.Advance(dashboard.SampleEvery)
	doc = dash.untilDoc("b's sample", func(d dashboard.Dashboard) bool { return d.History.Newest() > t0.UnixMilli() })
	if len(doc.History.Samples) != 1 {
		t.Fatalf("a later snapshot carries %d samples, want the new one", len(doc.History.Samples))
	}
	items := f.rdb.LRange(ctx, f.keys.DashboardHistory(), 0, -1).Val()
	samples, badItems := redisq.ParseHistory(items)
	if badItems != 0 || len(samples) < 2 || samples[0].T != t0.UnixMilli() {
		t.Fatalf("history in Redis: %v", items)
	}
	for k := 1; k < len(samples); k++ {
		if samples[k].T <= samples[k-1].T {
			t.Fatalf("history in Redis not in order: %v", items)
		}
	}
	if !strings.Contains(items[len(items)-1], `"waiting":{`) {
		t.Fatalf("newest item %s", items[len(items)-1])
	}
}
