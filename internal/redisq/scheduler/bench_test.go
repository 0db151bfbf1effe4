package scheduler

import (
	"slices"
	"strconv"
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
