package jobs_test

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/jobtype"
)

// benchEngine is the real engine on a real SQLite file, with queue "q".
func benchEngine(b *testing.B) *jobs.Engine {
	b.Helper()
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
	e, err := jobs.Open(ctx, jobs.Config{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true}); err != nil {
		b.Fatal(err)
	}
	return e
}

// enqueueScheduled submits n jobs in batches of 1,000, each due at
// due(i) (nil: at once).
func enqueueScheduled(b *testing.B, e *jobs.Engine, n int, due func(i int) *time.Time) {
	b.Helper()
	batch := make([]jobtype.JobSpec, 0, 1000)
	for i := 0; i < n; i += len(batch) {
		batch = batch[:0]
		for k := i; k < min(n, i+1000); k++ {
			batch = append(batch, jobtype.JobSpec{Queue: "q", Payload: []byte(`1`), RunAt: due(k)})
		}
		if _, err := e.Enqueue(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnqueueScheduled is the enqueue rate of jobs due at once
// against jobs scheduled within the next hour, through the real engine
// and SQLite store, in batches of 1,000 (one op: one job). Run with:
//
//	go test -run '^$' -bench BenchmarkEnqueueScheduled -benchtime 200000x -count 5 ./internal/jobs/
func BenchmarkEnqueueScheduled(b *testing.B) {
	for _, kind := range []string{"immediate", "scheduled"} {
		b.Run(kind, func(b *testing.B) {
			e := benchEngine(b)
			base := time.Now()
			due := func(i int) *time.Time {
				if kind == "immediate" {
					return nil
				}
				t := base.Add(time.Minute + time.Duration(i%3600)*time.Second)
				return &t
			}
			b.ResetTimer()
			enqueueScheduled(b, e, b.N, due)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkScheduledLateness measures how late scheduled jobs start with
// none or a million others waiting (due in one to two hours): each op
// submits one job due 20 ms ahead and has an agent, waiting in a lease,
// take it. Its lateness runs from the later of its runAt and the lease
// call (should the submission have taken longer than 20 ms) to the lease's
// answer, which comes once the start is durable. The clock loop
// (Engine.Run) sleeps until the core's next deadline: nothing polls. The
// garbage collector runs once before the measurement, so that the cycle
// the enqueue of a million jobs leaves running (over a second of marking
// a 400 MB heap on two cores) is not what is measured. It reports the
// 50th and 99th percentiles and the maximum. Run with:
//
//	go test -run '^$' -bench BenchmarkScheduledLateness -benchtime 2000x -timeout 30m ./internal/jobs/
func BenchmarkScheduledLateness(b *testing.B) {
	for _, waiting := range []int{0, 1_000_000} {
		b.Run("waiting="+strconv.Itoa(waiting), func(b *testing.B) { benchLateness(b, waiting) })
	}
}

func benchLateness(b *testing.B, waiting int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := benchEngine(b)
	base := time.Now().Add(time.Hour)
	enqueueScheduled(b, e, waiting, func(i int) *time.Time {
		t := base.Add(time.Duration(i) * 3600 * time.Millisecond)
		return &t
	})
	runtime.GC() // see above
	go e.Run(ctx)
	late := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		due := time.Now().Add(20 * time.Millisecond)
		if _, err := e.Enqueue(ctx, []jobtype.JobSpec{{Queue: "q", RunAt: &due}}); err != nil {
			b.Fatal(err)
		}
		asked := time.Now()
		ans, err := e.Lease(ctx, jobtype.LeaseRequest{Agent: "a", Slots: 1, WaitMs: 5000})
		got := time.Now()
		if err != nil || len(ans.Jobs) != 1 {
			b.Fatalf("lease: %v, %d jobs", err, len(ans.Jobs))
		}
		if got.Before(due) {
			b.Fatalf("job started %s early", due.Sub(got))
		}
		late = append(late, got.Sub(later(due, asked)))
		j := ans.Jobs[0]
		if _, err := e.Complete(ctx, "a", []jobtype.Result{{ID: j.ID, Attempt: j.Attempt}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(late)
	pct := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))].Microseconds()) }
	b.ReportMetric(pct(0.5), "p50-late-µs")
	b.ReportMetric(pct(0.99), "p99-late-µs")
	b.ReportMetric(pct(1), "max-late-µs")
	if got := e.Stats().Queues[0].Delayed; got != waiting {
		b.Fatalf("%d jobs waiting at the end; want %d", got, waiting)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
