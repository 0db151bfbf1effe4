package sqlitejobs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// BenchmarkInsertBatches writes batches of 1,000 new jobs, as a bulk
// enqueue hands them to the store: ns/op is per job.
func BenchmarkInsertBatches(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	ctx := context.Background()
	now := time.Now()
	spec := jobtype.JobSpec{Queue: "q", Payload: []byte(`{"n":1}`), Tier: "fast", TimeoutMs: 60000}
	b.ResetTimer()
	for id := int64(1); id <= int64(b.N); {
		ops := make([]jobs.Op, 0, 1000)
		for ; len(ops) < 1000 && id <= int64(b.N); id++ {
			ops = append(ops, jobs.Op{Kind: jobs.OpInsert, Record: &jobs.Record{ID: id, Spec: spec, CreatedAt: now}})
		}
		if err := s.Append(ops...).Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
