package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/internal/sqlitejobs"
	"github.com/usherhq/usher/jobtype"
)

// benchQueue is the benchmarks' queue; its name is longer than a byte, so
// that decoding it allocates as decoding a real queue name does.
const benchQueue = "mail"

// benchEngine is the real engine on a real SQLite file, with benchQueue.
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
	if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: benchQueue, Active: true}); err != nil {
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
			batch = append(batch, jobtype.JobSpec{Queue: benchQueue, Payload: []byte(`1`), RunAt: due(k)})
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

// BenchmarkWaitingMemory is what the engine keeps in memory per waiting
// job: the live heap and heap objects it adds, after a full collection,
// once n jobs due in one to two hours were enqueued through the real
// engine and SQLite store; and gc-ms, how long a full collection then
// takes, the shortest of five (the garbage collector marks every live
// object and pointer, so this is roughly the marking work of each cycle
// while the jobs wait). Run with:
//
//	go test -run '^$' -bench BenchmarkWaitingMemory -benchtime 1x -count 3 -timeout 30m ./internal/jobs/
func BenchmarkWaitingMemory(b *testing.B) {
	for _, waiting := range []int{100_000, 1_000_000} {
		b.Run("waiting="+strconv.Itoa(waiting), func(b *testing.B) {
			for range b.N {
				e := benchEngine(b)
				before := liveHeap()
				enqueueHourAhead(b, e, waiting)
				after := liveHeap()
				b.ReportMetric(float64(fastestGC(5).Microseconds())/1000, "gc-ms")
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(waiting), "heapB/job")
				b.ReportMetric(float64(after.HeapObjects-before.HeapObjects)/float64(waiting), "objects/job")
				runtime.KeepAlive(e)
			}
		})
	}
}

// fastestGC returns the shortest of n full collections: the one least
// slowed by whatever else runs on the machine.
func fastestGC(n int) time.Duration {
	best := time.Duration(math.MaxInt64)
	for range n {
		start := time.Now()
		runtime.GC()
		best = min(best, time.Since(start))
	}
	return best
}

// liveHeap returns the memory statistics after a full collection.
func liveHeap() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// enqueueHourAhead submits n scheduled jobs due one to two hours from now
// (spread evenly) in batches of 1,000, each decoded from JSON as the HTTP
// API decodes a request, so that the engine gets its strings, payloads
// and times as the server does: each job's own.
func enqueueHourAhead(b *testing.B, e *jobs.Engine, n int) {
	b.Helper()
	base := time.Now().Add(time.Hour).UTC()
	var body []byte
	for i := 0; i < n; i += 1000 {
		body = append(body[:0], '[')
		for k := i; k < min(n, i+1000); k++ {
			if k > i {
				body = append(body, ',')
			}
			due := base.Add(time.Duration(k) * time.Hour / time.Duration(n))
			body = fmt.Appendf(body, `{"queue":%q,"payload":{"n":%d},"runAt":%q}`, benchQueue, k, due.Format(time.RFC3339Nano))
		}
		body = append(body, ']')
		var batch []jobtype.JobSpec
		if err := json.Unmarshal(body, &batch); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Enqueue(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScheduledLateness measures how late scheduled jobs start with
// none or a million others waiting (due in one to two hours): each op
// submits one job due 20 ms ahead and has an agent, waiting in a lease,
// take it. Its lateness runs from the later of its runAt and the lease
// call (should the submission have taken longer than 20 ms) to the lease's
// answer, which comes once the start is durable. The clock loop
// (Engine.Run) sleeps until the core's next deadline: nothing polls. It
// reports the 50th and 99th percentiles and the maximum, in two settings
// of the garbage collector:
//
//   - gc=before: a full collection runs before the measurement, so that
//     the cycle the enqueue of a million jobs leaves running (over a
//     second of marking a 400 MB heap on two cores) is not what is
//     measured;
//   - gc=during: the same, then full collections run back to back for
//     as long as the probes run, so that every probe overlaps the
//     marking of the waiting jobs (the worst case of a server whose
//     allocations keep the collector busy).
//
// Run with:
//
//	go test -run '^$' -bench BenchmarkScheduledLateness -benchtime 2000x -timeout 30m ./internal/jobs/
func BenchmarkScheduledLateness(b *testing.B) {
	for _, waiting := range []int{0, 1_000_000} {
		for _, gc := range []string{"before", "during"} {
			name := "waiting=" + strconv.Itoa(waiting) + "/gc=" + gc
			b.Run(name, func(b *testing.B) { benchLateness(b, waiting, gc == "during") })
		}
	}
}

func benchLateness(b *testing.B, waiting int, gcDuring bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := benchEngine(b)
	enqueueHourAhead(b, e, waiting)
	runtime.GC() // see above
	go e.Run(ctx)
	stopGC := func() {}
	if gcDuring {
		stopGC = collectBackToBack(b)
		defer stopGC()
	}
	late := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		due := time.Now().Add(20 * time.Millisecond)
		if _, err := e.Enqueue(ctx, []jobtype.JobSpec{{Queue: benchQueue, RunAt: &due}}); err != nil {
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
	stopGC()
	slices.Sort(late)
	pct := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))].Microseconds()) }
	b.ReportMetric(pct(0.5), "p50-late-µs")
	b.ReportMetric(pct(0.99), "p99-late-µs")
	b.ReportMetric(pct(1), "max-late-µs")
	if got := e.Stats().Queues[0].Delayed; got != waiting {
		b.Fatalf("%d jobs waiting at the end; want %d", got, waiting)
	}
}

// collectBackToBack runs full collections one after another until the
// returned function is first called; that reports how many ran.
func collectBackToBack(b *testing.B) (stop func()) {
	quit := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-quit:
				done <- n
				return
			default:
			}
			runtime.GC()
			n++
		}
	}()
	return sync.OnceFunc(func() {
		close(quit)
		b.ReportMetric(float64(<-done), "gc-cycles")
	})
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
