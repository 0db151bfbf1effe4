package sched

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCycle measures one op = submit one job + assign one job (Pull) +
// complete one job, with a given number of jobs already queued over 10,000
// distinct keys (each limited to 5 running) and a mix of FIFO and random
// queues at two priorities. It reports B/queued, the heap the core holds per
// queued job. Run with:
//
//	go test -run '^$' -bench BenchmarkCycle -benchmem ./internal/sched/
func BenchmarkCycle(b *testing.B) {
	for _, queued := range []int{1_000, 10_000, 100_000, 1_000_000} {
		b.Run("queued="+strconv.Itoa(queued), func(b *testing.B) { benchCycle(b, queued, 0) })
	}
}

// BenchmarkCycleRate is BenchmarkCycle with rate keys in the mix: every
// other key is "api:…", limited to 5 running and to 50 starts a second
// with a burst of 2, and the clock advances 10 µs an op (a key is picked
// about every 100 ms of virtual time, a token comes every 20 ms). A start
// that finds its key's bucket down to its last token empties it (about a
// fifth of the api starts); a job of the key that comes to a head before
// the next token is parked, waits in the rate heap, and Pull shows it
// again when the token is due. bench/cycleratio.sh -rate measures both in
// one process and reports the ratio:
//
//	go test -run '^$' -bench 'BenchmarkCycle(Rate)?$' -benchmem ./internal/sched/
func BenchmarkCycleRate(b *testing.B) {
	for _, queued := range []int{1_000, 10_000, 100_000, 1_000_000} {
		b.Run("queued="+strconv.Itoa(queued), func(b *testing.B) { benchCycle(b, queued, 2) })
	}
}

// BenchmarkCycleRateDry is BenchmarkCycleRate with a burst of 1, the worst
// case: every start of an api key empties its bucket for 20 ms of virtual
// time, and any job of the key that comes to a head meanwhile is parked.
func BenchmarkCycleRateDry(b *testing.B) {
	for _, queued := range []int{1_000, 1_000_000} {
		b.Run("queued="+strconv.Itoa(queued), func(b *testing.B) { benchCycle(b, queued, 1) })
	}
}

// benchRateStep is how far the clock moves in an op of BenchmarkCycleRate.
const benchRateStep = 10 * time.Microsecond

const benchKeys = 10_000

type cycleBench struct {
	s       *Scheduler
	clk     *clock
	step    time.Duration // clock advance per op
	rng     *rand.Rand
	next    int
	ids     idBatch
	buf     []Assignment // reused by every pull
	running []Assignment // ring of running attempts, oldest at head
	head    int
	keys    [][]string // each key as a JobSpec.Keys (the core keeps no slice)
	queues  []string
}

// idBatch makes fresh job ids "j1", "j2", … cut from one string per 1,024
// ids, counting in decimal digits, so that making an id costs the
// benchmark little and no allocation of its own.
type idBatch struct {
	ids  []string
	buf  []byte
	last []byte // the last id made, digits only
	i    int
}

func (x *idBatch) next() string {
	if x.i == len(x.ids) {
		x.refill()
	}
	x.i++
	return x.ids[x.i-1]
}

func (x *idBatch) refill() {
	b := x.buf[:0]
	var ends [1024]int
	for k := range ends {
		d := x.last
		i := len(d) - 1
		for ; i >= 0 && d[i] == '9'; i-- {
			d[i] = '0'
		}
		if i < 0 {
			d = append([]byte{'1'}, d...)
		} else {
			d[i]++
		}
		x.last = d
		b = append(append(b, 'j'), d...)
		ends[k] = len(b)
	}
	all, start := string(b), 0
	x.ids = x.ids[:0]
	for _, end := range ends {
		x.ids = append(x.ids, all[start:end])
		start = end
	}
	x.buf, x.i = b, 0
}

// newCycleBench builds the benchmark's scheduler; with burst > 0 every
// other key is rated (BenchmarkCycleRate).
func newCycleBench(b *testing.B, burst int) *cycleBench {
	clk := newClock()
	s, err := New(Config{Now: clk.Now, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		b.Fatal(err)
	}
	cb := &cycleBench{s: s, clk: clk, rng: rand.New(rand.NewPCG(3, 4))}
	for i, spec := range []QueueSpec{
		{Name: "scan-high", Priority: 10, Order: OrderRandom},
		{Name: "web-high", Priority: 10, Order: OrderFIFO},
		{Name: "scan-low", Priority: 0, Order: OrderRandom},
		{Name: "web-low", Priority: 0, Order: OrderFIFO},
	} {
		if err := s.DefineQueue(spec); err != nil {
			b.Fatal(err)
		}
		cb.queues = append(cb.queues, spec.Name)
		_ = i
	}
	if err := s.SetKeyLimit("net:*", 5); err != nil {
		b.Fatal(err)
	}
	rated := burst > 0
	if rated {
		cb.step = benchRateStep
		if err := errors.Join(s.SetKeyLimit("api:*", 5), s.SetKeyRate("api:*", Rate{Count: 50, Per: time.Second, Burst: burst})); err != nil {
			b.Fatal(err)
		}
	}
	for i := range benchKeys {
		prefix := "net:10."
		if rated && i%2 == 1 {
			prefix = "api:10."
		}
		cb.keys = append(cb.keys, []string{prefix + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ".0/24"})
	}
	if err := s.AddWorker(WorkerSpec{ID: "agent", Slots: 64}); err != nil {
		b.Fatal(err)
	}
	return cb
}

func (cb *cycleBench) submit(b *testing.B) {
	cb.next++
	err := cb.s.Submit(JobSpec{
		ID:    cb.ids.next(),
		Queue: cb.queues[cb.next%len(cb.queues)],
		Keys:  cb.keys[cb.rng.IntN(len(cb.keys))],
	})
	if err != nil {
		b.Fatal(err)
	}
}

func (cb *cycleBench) pull(b *testing.B) {
	as, err := cb.s.PullAppend(cb.buf[:0], "agent", 1)
	if err != nil || len(as) != 1 {
		b.Fatalf("pull: %v %v", as, err)
	}
	cb.buf = as
	cb.running = append(cb.running, as[0])
	if cb.head > len(cb.running)/2 { // slide the ring's live part down
		n := copy(cb.running, cb.running[cb.head:])
		cb.running, cb.head = cb.running[:n], 0
	}
}

func (cb *cycleBench) completeOldest(b *testing.B) {
	a := cb.running[cb.head]
	cb.head++
	if ack := cb.s.Complete(a.JobID, a.Attempt, Succeeded); ack.Ignored {
		b.Fatalf("completion of %s ignored", a.JobID)
	}
}

// op is one op of BenchmarkCycle. It is not inlined, so that a profiler can
// count inside it alone (docs/benchmarks.md: callgrind --toggle-collect).
//
//go:noinline
func (cb *cycleBench) op(b *testing.B) {
	if cb.step != 0 {
		cb.clk.t = cb.clk.t.Add(cb.step)
	}
	cb.submit(b)
	cb.pull(b)
	cb.completeOldest(b)
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func benchCycle(b *testing.B, queued, burst int) {
	cb := newCycleBench(b, burst)
	before := heapInUse()
	for range queued {
		cb.submit(b)
	}
	perJob := float64(heapInUse()-before) / float64(queued)
	for range 32 { // a steady load of running jobs
		cb.pull(b)
	}
	b.ReportAllocs()
	for b.Loop() {
		cb.op(b)
	}
	b.ReportMetric(perJob, "B/queued")
	runtime.KeepAlive(cb)
}

// BenchmarkCyclePhases is BenchmarkCycle at 10^3 and 10^6 queued with each
// call timed apart (submit-ns, pull-ns, complete-ns; the clock reads add
// some tens of ns to each), so that a change in the op's cost can be put
// on the call it comes from. Run with:
//
//	go test -run '^$' -bench BenchmarkCyclePhases -benchtime 500000x ./internal/sched/
func BenchmarkCyclePhases(b *testing.B) {
	for _, queued := range []int{1_000, 1_000_000} {
		b.Run("queued="+strconv.Itoa(queued), func(b *testing.B) {
			cb := newCycleBench(b, 0)
			for range queued {
				cb.submit(b)
			}
			for range 32 {
				cb.pull(b)
			}
			var submit, pull, complete time.Duration
			for b.Loop() {
				t0 := time.Now()
				cb.submit(b)
				t1 := time.Now()
				cb.pull(b)
				t2 := time.Now()
				cb.completeOldest(b)
				t3 := time.Now()
				submit, pull, complete = submit+t1.Sub(t0), pull+t2.Sub(t1), complete+t3.Sub(t2)
			}
			n := float64(b.N)
			b.ReportMetric(float64(submit.Nanoseconds())/n, "submit-ns")
			b.ReportMetric(float64(pull.Nanoseconds())/n, "pull-ns")
			b.ReportMetric(float64(complete.Nanoseconds())/n, "complete-ns")
		})
	}
}
