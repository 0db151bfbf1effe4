package jobstore

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobs/storetest"
	"github.com/usherhq/usher/internal/redisq"
	"github.com/usherhq/usher/internal/redisq/redistest"
)

// BenchmarkLifecycle writes each job's life (insert, start, finish) from
// many goroutines at once, each waiting for its job's changes to be
// durable, as the engine's concurrent requests do (writers: goroutines
// with GOMAXPROCS=2); ops/s counts changes.
//
//	go test -run XXX -bench Lifecycle ./internal/redisq/jobstore/
func BenchmarkLifecycle(b *testing.B) {
	rdb := client(b, redistest.Start(b).URL())
	for _, writers := range []int{2, 16, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := New(rdb, redisq.NewKeys(fmt.Sprintf("{b%d}:", writers)), Fence{Token: "t"}, nil)
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
					err := s.Append(jobs.Op{Kind: jobs.OpFinish, ID: id, State: jobs.StateSucceeded, At: now, Result: &jobs.Result{}}).
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
