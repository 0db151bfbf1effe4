package scheduler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/usherhq/usher/internal/redisq"
)

// BenchmarkDecisionLatency measures, with backends free, the time from a
// queue server's push to queue.incoming (the pipeline that writes the task
// hash and pushes its ID) to the entry's arrival in queue.outcoming, read
// by a blocked XREAD as a backend would. It reports the median and the
// 99th percentile in ms. The test plays the queue server and the backend;
// each task finishes at once so that its slot is free again.
func BenchmarkDecisionLatency(b *testing.B) {
	e := newEnv(b)
	e.addBackends(16, time.Hour)
	n := e.startScheduler("a", func(c *Config) { c.MonitorEvery = time.Minute })
	e.waitLeading(n, wait)
	e.waitFor("16 slots", wait, func() bool { return e.status(n).Core.Slots == 16 })
	k := e.keys
	fields := redisq.TaskOptions{Duration: 3 * time.Second, Main: "a.asy"}.Fields()
	last := "0-0"
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := "bench-" + strconv.Itoa(i)
		pipe := e.rdb.Pipeline()
		pipe.HSet(e.ctx(), k.Task(id), fields)
		pipe.PExpire(e.ctx(), k.Task(id), time.Minute)
		t0 := time.Now()
		pipe.RPush(e.ctx(), k.Incoming(), id)
		if _, err := pipe.Exec(e.ctx()); err != nil {
			b.Fatal(err)
		}
		res, err := e.rdb.XRead(e.ctx(), &redis.XReadArgs{Streams: []string{k.Outcoming(), last}, Count: 1, Block: 5 * time.Second}).Result()
		if err != nil || len(res) != 1 || len(res[0].Messages) != 1 || res[0].Messages[0].Values["task"] != id {
			b.Fatalf("XREAD: %v %v", res, err)
		}
		lat = append(lat, time.Since(t0))
		last = res[0].Messages[0].ID
		pipe = e.rdb.Pipeline()
		pipe.XDel(e.ctx(), k.Outcoming(), last)
		pipe.Del(e.ctx(), k.Task(id))
		pipe.RPush(e.ctx(), k.Finished(), id)
		if _, err := pipe.Exec(e.ctx()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkThroughput measures how many tasks per second the leader
// schedules when it is the bottleneck: 64 backends that finish each task
// the moment they read it (the test plays them, reading queue.outcoming
// as a consumer group and pushing to queue.finished), with b.N tasks
// pushed to queue.incoming at once (the test plays the queue servers).
// One op is one task from queue.incoming to queue.finished.
//
//	go test -run '^$' -bench Throughput -benchtime 20000x ./internal/redisq/scheduler/
func BenchmarkThroughput(b *testing.B) {
	e := newEnv(b)
	e.addBackends(64, time.Hour)
	n := e.startScheduler("a", func(c *Config) { c.MonitorEvery = time.Minute })
	e.waitLeading(n, wait)
	e.waitFor("64 slots", wait, func() bool { return e.status(n).Core.Slots == 64 })
	k := e.keys
	ctx := e.ctx()
	if err := e.rdb.XGroupCreateMkStream(ctx, k.Outcoming(), redisq.ConsumerGroup, "0").Err(); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		b.Fatal(err)
	}
	fields := redisq.TaskOptions{Duration: 3 * time.Second, Main: "a.asy"}.Fields()
	ids := make([]string, b.N)
	pipe := e.rdb.Pipeline()
	for i := range ids {
		ids[i] = "tp-" + strconv.Itoa(i)
		pipe.HSet(ctx, k.Task(ids[i]), fields)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	b.ResetTimer()
	go func() { done <- playBackends(e, b.N) }()
	for i := 0; i < len(ids); i += 1000 {
		if err := e.rdb.RPush(ctx, k.Incoming(), anySlice(ids[i:min(i+1000, len(ids))])...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// playBackends takes n tasks from queue.outcoming and finishes each at
// once, as fast backends would, in batches.
func playBackends(e *env, n int) error {
	k, ctx := e.keys, e.ctx()
	for n > 0 {
		res, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: redisq.ConsumerGroup, Consumer: "bench",
			Streams: []string{k.Outcoming(), ">"}, Count: 64, Block: 10 * time.Second}).Result()
		if err != nil {
			return fmt.Errorf("XREADGROUP with %d tasks to go: %w", n, err)
		}
		pipe := e.rdb.Pipeline()
		for _, m := range res[0].Messages {
			pipe.XAck(ctx, k.Outcoming(), redisq.ConsumerGroup, m.ID)
			pipe.XDel(ctx, k.Outcoming(), m.ID)
			id, _ := m.Values["task"].(string)
			pipe.Del(ctx, k.Task(id))
			pipe.RPush(ctx, k.Finished(), id)
			n--
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
