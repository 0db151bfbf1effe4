package storetest

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/testclock"
	"github.com/usherhq/usher/jobtype"
)

// keyed is Insert with an idempotency key and a creation time.
func keyed(id int64, key string, at time.Time) jobs.Op {
	op := Insert(id)
	op.Record.Spec.IdempotencyKey = key
	op.Record.CreatedAt = at
	return op
}

// loadKeys reopens the store and lists the keys Load gives, as
// "key=id@unixms", or "key=request runs@unixms" for a request's key.
func loadKeys(t *testing.T, s jobs.Store) []string {
	t.Helper()
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range snap.Keys {
		v := strconv.FormatInt(k.Job, 10)
		if k.Jobs != nil {
			v = "request " + jobs.FormatRuns(k.Jobs)
		}
		out = append(out, k.Key+"="+v+"@"+strconv.FormatInt(k.At.UnixMilli(), 10))
	}
	slices.Sort(out)
	return out
}

// An insert keeps its job's idempotency key, durably, with the job; a
// later insert with the same key (after the engine let it expire) takes
// it over; OpPruneKeys deletes the keys kept since before its time and
// no other.
func testIdempotencyKeys(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	t0 := time.UnixMilli(1700000000000)
	Apply(t, s, keyed(1, "a", t0), keyed(2, "b", t0.Add(time.Second)), Insert(3), keyed(4, "c", t0.Add(2*time.Second)))
	Apply(t, s, keyed(5, "a", t0.Add(3*time.Second)))
	// A request's key lives apart from the jobs' keys, even under the
	// same name.
	Apply(t, s, jobs.Op{Kind: jobs.OpKeepKey, Key: &jobs.IdemKey{Key: "a", At: t0.Add(time.Second), Jobs: []jobs.IDRun{{First: 1, N: 2}, {First: 4, N: 1}}}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	want := []string{"a=5@1700000003000", "a=request 1+2,4+1@1700000001000", "b=2@1700000001000", "c=4@1700000002000"}
	if got := loadKeys(t, s); !slices.Equal(got, want) {
		t.Fatalf("keys after a reopen = %v; want %v", got, want)
	}
	j, err := s.Job(context.Background(), 2)
	if err != nil || j.IdempotencyKey != "b" {
		t.Fatalf("job 2 = %+v, %v; want its spec to keep key b", j, err)
	}
	Apply(t, s, jobs.Op{Kind: jobs.OpPruneKeys, At: t0.Add(2 * time.Second)})
	want = []string{"a=5@1700000003000", "c=4@1700000002000"}
	if got := loadKeys(t, s); !slices.Equal(got, want) {
		t.Fatalf("keys after pruning those before +2s = %v; want %v", got, want)
	}
}

// The real engine on the store, through a restart (or, for Redis, a
// new leader): an enqueue that repeats a kept idempotency key, or an
// unfinished unique job, gives the first job's id and creates nothing;
// once the key's retention has passed, or the unique job finished, the
// same enqueue creates a job again, and the expired key leaves the store.
func testEngineDedupRestart(t *testing.T, open func(t *testing.T) jobs.Store) {
	ctx := context.Background()
	clk := testclock.New(time.Now())
	start := func() (*jobs.Engine, jobs.Store) {
		s := open(t)
		e, err := jobs.Open(ctx, jobs.Config{Store: s, Now: clk.Now, KeyRetention: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return e, s
	}
	e, s := start()
	if _, err := e.CreateQueue(ctx, jobtype.Queue{Name: "q", Active: true}); err != nil {
		t.Fatal(err)
	}
	uniq := &jobtype.UniqueOpts{ByArgs: true}
	batch := []jobtype.JobSpec{
		{Queue: "q", IdempotencyKey: "k1", Payload: []byte(`1`)},
		{Queue: "q", IdempotencyKey: "k1", Payload: []byte(`2`)},
		{Queue: "q", Unique: uniq, Payload: []byte(`{"a":1,"b":2}`)},
		{Queue: "q", Unique: uniq, Payload: []byte(`{"b":2, "a":1}`)},
		{Queue: "q", Unique: uniq, Payload: []byte(`{"a":2}`)},
	}
	enqueue := func(e *jobs.Engine, specs []jobtype.JobSpec, ids []string, existing []bool) {
		t.Helper()
		ans, err := e.EnqueueAnswer(ctx, specs)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ans.IDs, ids) || !slices.Equal(ans.Existing, existing) {
			t.Fatalf("enqueue = %v %v; want %v %v", ans.IDs, ans.Existing, ids, existing)
		}
	}
	request := func(e *jobs.Engine, ids []string, existing []bool) {
		t.Helper()
		ans, err := e.EnqueueKeyed(ctx, "r1", []jobtype.JobSpec{{Queue: "q", Payload: []byte(`9`)}, batch[0]})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ans.IDs, ids) || !slices.Equal(ans.Existing, existing) {
			t.Fatalf("request r1 = %v %v; want %v %v", ans.IDs, ans.Existing, ids, existing)
		}
	}
	enqueue(e, batch, []string{"1", "1", "2", "2", "3"}, []bool{false, true, false, true, false})
	request(e, []string{"4", "1"}, []bool{false, true})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e, s = start()
	enqueue(e, batch, []string{"1", "1", "2", "2", "3"}, []bool{true, true, true, true, true})
	request(e, []string{"4", "1"}, []bool{true, true})
	if got := states(t, e); len(got) != 4 {
		t.Fatalf("jobs after repeating the batch and the request: %v; want the first 4 only", got)
	}
	// Job 2 finishes: a unique job alike may be created again.
	got := lease(t, e, "agent", 4)
	for _, j := range got {
		if j.ID == "2" {
			if _, err := e.Complete(ctx, "agent", []jobtype.Result{{ID: j.ID, Attempt: j.Attempt}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue(e, batch[2:4], []string{"5", "5"}, []bool{false, true})
	// Running job 3 counts only when "running" is among the states.
	onlyQueued := jobtype.JobSpec{Queue: "q", Payload: []byte(`{"a":2}`),
		Unique: &jobtype.UniqueOpts{ByArgs: true, States: []jobtype.State{jobtype.StateQueued}}}
	enqueue(e, []jobtype.JobSpec{onlyQueued}, []string{"6"}, nil)
	clk.Advance(2 * time.Hour) // past the keys' retention
	enqueue(e, batch[:1], []string{"7"}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e, s = start()
	enqueue(e, batch[:2], []string{"7", "7"}, []bool{true, true})
	if keys := loadKeys(t, s); len(keys) != 1 || keys[0][:5] != "k1=7@" {
		t.Fatalf("keys in the store = %v; want k1 of job 7 alone (the expired ones pruned)", keys)
	}
}
