package redisjobs

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobs/storetest"
	"github.com/usherhq/usher/internal/redisq/redistest"
	"github.com/usherhq/usher/jobtype"
)

// BenchmarkLifecycle writes each job's life (insert, start, finish) from
// many goroutines at once, each waiting for its job's changes to be
// durable, as the engine's concurrent requests do (writers: goroutines
// with GOMAXPROCS=2); ops/s counts changes.
//
//	go test -run XXX -bench Lifecycle ./internal/redisq/redisjobs/
func BenchmarkLifecycle(b *testing.B) {
	rdb := client(b, redistest.Start(b).URL())
	for _, writers := range []int{2, 16, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := New(rdb, fmt.Sprintf("{b%d}:", writers), Fence{Token: "t"}, nil)
			defer s.Close()
			if err := rdb.Set(context.Background(), s.fence.Key, "t", 0).Err(); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			now := time.Now()
			b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := next.Add(1)
					s.Append(storetest.Insert(id))
					s.Append(jobs.Op{Kind: jobs.OpStart, ID: id, Attempt: 1, Agent: "a", At: now})
					err := s.Append(jobs.Op{Kind: jobs.OpFinish, ID: id, State: jobtype.StateSucceeded, At: now, Result: &jobtype.Result{}}).
						Wait(context.Background())
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(3*b.N)/time.Since(start).Seconds(), "ops/s")
		})
	}
}

// BenchmarkRedisCost writes jobs as the engine does under load, each
// change kind in batches of 1000 (inserts, then starts, then successes,
// each batch one script), on a redis-server with the AOF of the jobs
// bench (appendonly, everysec), and reports what Redis spends per job:
// CPU time of its main thread (INFO cpu) and commands run (INFO stats,
// those inside scripts included). Redis's one thread bounds multi-node
// mode's jobs/s (docs/benchmarks.md), so these are the figures a layout
// change must lower; CPU time is steadier than a rate on a shared
// machine.
//
//	go test -run XXX -bench RedisCost -benchtime 200000x ./internal/redisq/redisjobs/
func BenchmarkRedisCost(b *testing.B) {
	rdb := client(b, redistest.Start(b, "--appendonly", "yes", "--appendfsync", "everysec").URL())
	ctx := context.Background()
	s := New(rdb, "{cost}:", Fence{Token: "t"}, nil)
	defer s.Close()
	if err := rdb.Set(ctx, s.fence.Key, "t", 0).Err(); err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	now := time.Now()
	kinds := []jobs.OpKind{jobs.OpInsert, jobs.OpStart, jobs.OpFinish}
	var cpu [3]float64
	_, cmds0 := redisCost(b, rdb)
	b.ResetTimer()
	for first := int64(1); first <= int64(b.N); first += batch {
		last := min(first+batch-1, int64(b.N))
		for i, kind := range kinds {
			ops := make([]jobs.Op, 0, batch)
			for id := first; id <= last; id++ {
				ops = append(ops, lifeOp(kind, id, now))
			}
			before, _ := redisCost(b, rdb)
			if err := s.Append(ops...).Wait(ctx); err != nil {
				b.Fatal(err)
			}
			after, _ := redisCost(b, rdb)
			cpu[i] += after - before
		}
	}
	b.StopTimer()
	_, cmds1 := redisCost(b, rdb)
	for i, name := range []string{"insert", "start", "finish"} {
		b.ReportMetric(cpu[i]*1e6/float64(b.N), name+"-µs/job")
	}
	b.ReportMetric((cpu[0]+cpu[1]+cpu[2])*1e6/float64(b.N), "redis-µs/job")
	b.ReportMetric(float64(cmds1-cmds0)/float64(b.N), "cmds/job")
}

// lifeOp is a job's insert (created at now, as the jobs of one
// submission are), its start, or its success.
func lifeOp(kind jobs.OpKind, id int64, now time.Time) jobs.Op {
	switch kind {
	case jobs.OpInsert:
		op := storetest.Insert(id)
		op.Record.CreatedAt = now
		return op
	case jobs.OpStart:
		return jobs.Op{Kind: jobs.OpStart, ID: id, Attempt: 1, Agent: "a", At: now}
	}
	return jobs.Op{Kind: jobs.OpFinish, ID: id, State: jobtype.StateSucceeded, At: now, Result: &jobtype.Result{}}
}

// redisCost reads the CPU seconds of Redis's main thread and the
// commands it has run.
func redisCost(b *testing.B, rdb redis.UniversalClient) (float64, int64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu", "stats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var cpu float64
	var cmds int64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "used_cpu_user_main_thread", "used_cpu_sys_main_thread":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO %s: %q", k, v)
			}
			cpu += f
		case "total_commands_processed":
			if cmds, err = strconv.ParseInt(v, 10, 64); err != nil {
				b.Fatalf("INFO %s: %q", k, v)
			}
		}
	}
	return cpu, cmds
}
