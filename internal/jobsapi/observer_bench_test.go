package jobsapi_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/jobtype"
)

// BenchmarkObserverStartEnd is what the Prometheus Observer costs per job:
// one attempt's start and its end (one op), over four queues. Run with:
//
//	go test -run '^$' -bench BenchmarkObserverStartEnd -benchmem -count 5 ./internal/jobsapi/
func BenchmarkObserverStartEnd(b *testing.B) {
	o := jobsapi.NewObserver()
	queues := []string{"mail", "scan", "render", "report"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q := queues[i&3]
		i++
		o.Started(q, 1500*time.Millisecond)
		o.Ended(q, jobs.OutcomeSucceeded, 3*time.Second, true)
	}
}

// BenchmarkEngineStartFinish is a job's lease and completion through the
// real engine on a real SQLite file (one op: one job, in batches of 100),
// without an Observer and with the Prometheus one: the Observer's share of
// the whole. Run with:
//
//	go test -run '^$' -bench BenchmarkEngineStartFinish -benchtime 20000x -count 5 ./internal/jobsapi/
func BenchmarkEngineStartFinish(b *testing.B) {
	for _, c := range []struct {
		name string
		obs  jobs.Observer
	}{{"none", nil}, {"prometheus", jobsapi.NewObserver()}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			db, err := sqlitedb.Open(ctx, filepath.Join(b.TempDir(), "usher.db"))
			if err != nil {
				b.Fatal(err)
			}
			s, err := sqlitejobs.Open(ctx, db, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close(); db.Close() })
			e, err := jobs.Open(ctx, jobs.Config{Store: s, Observer: c.obs})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: "mail", Active: true}); err != nil {
				b.Fatal(err)
			}
			specs := make([]jobtype.JobSpec, 1000)
			for i := range specs {
				specs[i] = jobtype.JobSpec{Queue: "mail", Payload: []byte(`1`)}
			}
			for n := 0; n < b.N; n += len(specs) {
				if _, err := e.Enqueue(ctx, specs); err != nil {
					b.Fatal(err)
				}
			}
			results := make([]jobtype.Result, 0, 100)
			b.ResetTimer()
			for done := 0; done < b.N; done += len(results) {
				ans, err := e.Lease(ctx, jobtype.LeaseRequest{Agent: "a", Slots: 100, Max: min(100, b.N-done)})
				if err != nil || len(ans.Jobs) == 0 {
					b.Fatalf("lease: %d jobs, %v", len(ans.Jobs), err)
				}
				results = results[:0]
				for _, j := range ans.Jobs {
					results = append(results, jobtype.Result{ID: j.ID, Attempt: j.Attempt})
				}
				if _, err := e.Complete(ctx, "a", results); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
