// Package storetest is the conformance suite of jobs.Store: every store
// (SQLite in internal/sqlitejobs, Redis in internal/redisq/redisjobs) runs
// it and must behave the same, from the changes it is given to what Load,
// Job, Jobs and WorkflowInfo read back, and under the real engine through
// a restart.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/jobtype"
)

// Opener makes empty durable data for one test and returns a function
// that opens a store on it. Each call of that function opens a new store
// on the same data (the test closes the previous one first); the opener
// closes every store it opened when the test ends (Close twice must be
// harmless).
type Opener func(t *testing.T) func(t *testing.T) jobs.Store

// Run runs the suite against the stores open makes.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		f    func(t *testing.T, open func(t *testing.T) jobs.Store)
	}{
		{"EmptyLoad", testEmptyLoad},
		{"LoadRebuildsFromChanges", testLoadRebuilds},
		{"JobThroughItsLife", testJobLife},
		{"QueuesAndLimits", testQueuesAndLimits},
		{"ChangesToMissingJobs", testMissingJobs},
		{"ListingFiltersAndPages", testListing},
		{"FindingByTagKeyTextAndTime", testFinding},
		{"AttemptHistory", testAttemptHistory},
		{"PruneDeletesOnlyOldFinishedJobs", testPrune},
		{"PrunedIDsAreNotGivenAgain", testPrunedIDs},
		{"ResetAfterAPruneWritesTheJobAnew", testResetAfterPrune},
		{"AppendOrderAndGroupCommit", testOrder},
		{"CloseWritesWhatWasAppended", testClose},
		{"EngineRestart", testEngineRestart},
		{"IdempotencyKeysKeptWithTheirJobs", testIdempotencyKeys},
		{"EngineKeepsIdempotencyKeysAndUniqueJobsThroughARestart", testEngineDedupRestart},
		{"ScheduleStored", testScheduleStored},
		{"ScheduledJobsThroughARestart", testScheduledRestart},
		{"HandlerReports", testHandlerReports},
		{"HandlerReportsOnRequeue", testHandlerReportsOnRequeue},
		{"EngineHandlerReports", testEngineHandlerReports},
		{"EngineTimeLimit", testEngineTimeLimit},
		{"RetryOfAJobPrunedAfterItsReadBringsItBack", func(t *testing.T, open func(t *testing.T) jobs.Store) {
			testRetryRacingAPrune(t, open, false, "job")
		}},
		{"RetryOfAWorkflowJobPrunedAfterItsReadsBringsBothBack", func(t *testing.T, open func(t *testing.T) jobs.Store) {
			testRetryRacingAPrune(t, open, true, "workflow")
		}},
		{"RetryOfAWorkflowJobPrunedBetweenItsReadsFindsNoJob", func(t *testing.T, open func(t *testing.T) jobs.Store) {
			testRetryRacingAPrune(t, open, true, "job")
		}},
		{"PeriodicJobEntries", testCronEntries},
		{"PeriodicJobsUnderTheEngine", testCronEngine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open(t)) })
	}
}

// Apply appends ops and waits until they are durable.
func Apply(t *testing.T, s jobs.Store, ops ...jobs.Op) {
	t.Helper()
	if err := s.Append(ops...).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Insert is the change that inserts job id of queue "q", after the
// given jobs, with a payload.
func Insert(id int64, after ...int64) jobs.Op {
	return InsertIn("q", 0, id, after...)
}

// InsertIn is Insert into a queue and workflow (0: none).
func InsertIn(queue string, wf, id int64, after ...int64) jobs.Op {
	return jobs.Op{Kind: jobs.OpInsert, Record: &jobs.Record{ID: id, Workflow: wf,
		Spec:  jobtype.JobSpec{Queue: queue, Tier: "fast", TimeoutMs: 60000, Payload: []byte(`{"n":` + fmt.Sprint(id) + `}`), Keys: []string{"k"}},
		After: after, CreatedAt: time.UnixMilli(1700000000000 + id)}}
}

func load(t *testing.T, s jobs.Store) *jobs.Snapshot {
	t.Helper()
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func job(t *testing.T, s jobs.Store, id int64) jobtype.Job {
	t.Helper()
	j, err := s.Job(context.Background(), id)
	if err != nil {
		t.Fatalf("job %d: %v", id, err)
	}
	return j
}

func testEmptyLoad(t *testing.T, open func(t *testing.T) jobs.Store) {
	snap := load(t, open(t))
	if len(snap.Queues)+len(snap.Limits)+len(snap.Jobs) != 0 || snap.NextJob != 1 || snap.NextWorkflow != 1 {
		t.Fatalf("empty store loads %+v; want nothing and next ids 1, 1", snap)
	}
}

// Load gives back what the changes left: the queue, the limit, the
// unfinished jobs in id order with their unfinished dependencies and
// whether they ran, and the next ids.
func testLoadRebuilds(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	now := time.UnixMilli(1700000100000)
	Apply(t, s,
		jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "q", Order: "strict", Active: true}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "net:*", Limit: 3}},
		jobs.Op{Kind: jobs.OpWorkflow, ID: 1, Name: "w", At: now},
		InsertIn("q", 1, 1), InsertIn("q", 1, 2, 1), InsertIn("q", 1, 3, 2, 1), Insert(4),
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "a", At: now},
		jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateSucceeded, At: now, Result: &jobtype.Result{Output: "ok"}},
		jobs.Op{Kind: jobs.OpStart, ID: 2, Attempt: 1, Agent: "a", At: now},
		jobs.Op{Kind: jobs.OpFinish, ID: 4, State: jobtype.StateCancelled, At: now},
		Insert(5), jobs.Op{Kind: jobs.OpRequeue, ID: 5, At: now.Add(time.Minute)},
	)
	snap := load(t, s)
	if len(snap.Queues) != 1 || snap.Queues[0].Order != "strict" || !snap.Queues[0].Active ||
		len(snap.Limits) != 1 || snap.Limits[0] != (jobtype.KeyLimit{Pattern: "net:*", Limit: 3}) {
		t.Fatalf("queues %v limits %v", snap.Queues, snap.Limits)
	}
	if snap.NextJob != 6 || snap.NextWorkflow != 2 {
		t.Fatalf("next ids %d %d; want 6 2", snap.NextJob, snap.NextWorkflow)
	}
	want := []jobs.Record{
		{ID: 2, Workflow: 1, Attempt: 1, Running: true},
		{ID: 3, Workflow: 1, After: []int64{2}},
		{ID: 5, ReadyAt: now.Add(time.Minute)},
	}
	if len(snap.Jobs) != len(want) {
		t.Fatalf("unfinished jobs = %+v; want ids 2, 3, 5", snap.Jobs)
	}
	for i, w := range want {
		g := snap.Jobs[i]
		if g.ID != w.ID || g.Workflow != w.Workflow || g.Attempt != w.Attempt || g.Running != w.Running ||
			!slices.Equal(g.After, w.After) || !g.ReadyAt.Equal(w.ReadyAt) ||
			string(g.Spec.Payload) != fmt.Sprintf(`{"n":%d}`, w.ID) || g.Spec.Queue != "q" || g.Spec.TimeoutMs != 60000 ||
			!slices.Equal(g.Spec.Keys, []string{"k"}) || !g.CreatedAt.Equal(time.UnixMilli(1700000000000+w.ID)) {
			t.Errorf("unfinished job %d = %+v; want %+v", i, g, w)
		}
	}
}

// A job read back through each change of its life shows exactly what
// the changes set.
func testJobLife(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	t0 := time.UnixMilli(1700000200000)
	ms := func(n int64) *time.Time { x := t0.Add(time.Duration(n) * time.Millisecond).UTC(); return &x }
	code := func(c int) *int { return &c }
	Apply(t, s, jobs.Op{Kind: jobs.OpWorkflow, ID: 7, Name: "wf", At: t0}, InsertIn("q", 7, 1))
	steps := []struct {
		name string
		op   jobs.Op
		want jobtype.Job
	}{
		{"start", jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "a1", At: *ms(1)},
			jobtype.Job{State: jobtype.StateRunning, Attempt: 1, Agent: "a1", StartedAt: ms(1)}},
		{"requeue with a result", jobs.Op{Kind: jobs.OpRequeue, ID: 1, At: *ms(2), Result: &jobtype.Result{ExitCode: 3, Output: "out", Error: "bad"}},
			jobtype.Job{State: jobtype.StateQueued, Attempt: 1, StartedAt: ms(1), ExitCode: code(3), Output: "out", Error: "bad"}},
		{"start again", jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 2, Agent: "a2", At: *ms(3)},
			jobtype.Job{State: jobtype.StateRunning, Attempt: 2, Agent: "a2", StartedAt: ms(3), ExitCode: code(3), Output: "out", Error: "bad"}},
		{"requeue without a result", jobs.Op{Kind: jobs.OpRequeue, ID: 1, At: *ms(4)},
			jobtype.Job{State: jobtype.StateQueued, Attempt: 2, StartedAt: ms(3), ExitCode: code(3), Output: "out", Error: "bad"}},
		{"start a third time", jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 3, Agent: "a3", At: *ms(5)},
			jobtype.Job{State: jobtype.StateRunning, Attempt: 3, Agent: "a3", StartedAt: ms(5), ExitCode: code(3), Output: "out", Error: "bad"}},
		{"fail", jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateFailed, At: *ms(6), Result: &jobtype.Result{ExitCode: 1, Output: "o2"}},
			jobtype.Job{State: jobtype.StateFailed, Attempt: 3, Agent: "a3", StartedAt: ms(5), FinishedAt: ms(6), ExitCode: code(1), Output: "o2"}},
		{"reset", jobs.Op{Kind: jobs.OpReset, ID: 1, At: *ms(7)},
			jobtype.Job{State: jobtype.StateQueued}},
		{"cancel without a result", jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateCancelled, At: *ms(8)},
			jobtype.Job{State: jobtype.StateCancelled, FinishedAt: ms(8)}},
	}
	for _, st := range steps {
		Apply(t, s, st.op)
		got := job(t, s, 1)
		w := st.want
		w.ID, w.Workflow, w.CreatedAt = "1", "7", time.UnixMilli(1700000000001).UTC()
		w.JobSpec = jobtype.JobSpec{Queue: "q", Tier: "fast", TimeoutMs: 60000, Payload: []byte(`{"n":1}`), Keys: []string{"k"}}
		if diff := diffJobs(got, w); diff != "" {
			t.Fatalf("after %s: %s", st.name, diff)
		}
	}
	if name, err := s.WorkflowInfo(context.Background(), 7); err != nil || name != "wf" {
		t.Fatalf("WorkflowInfo(7) = %q, %v", name, err)
	}
}

// diffJobs describes how got differs from want, or is "".
func diffJobs(got, want jobtype.Job) string {
	g, w := fmt.Sprintf("%+v", flat(got)), fmt.Sprintf("%+v", flat(want))
	if g != w {
		return fmt.Sprintf("job\n got %s\nwant %s", g, w)
	}
	return ""
}

// flat shows a job's pointers by value.
func flat(j jobtype.Job) []any {
	val := func(p any) any {
		switch v := p.(type) {
		case *time.Time:
			if v != nil {
				return v.UTC().Format(time.RFC3339Nano)
			}
		case *int:
			if v != nil {
				return *v
			}
		}
		return nil
	}
	return []any{j.ID, j.Queue, string(j.Payload), j.Tier, j.TimeoutMs, j.Keys, j.Workflow, j.State, j.Attempt,
		j.Agent, j.CreatedAt.UTC().Format(time.RFC3339Nano), val(j.StartedAt), val(j.FinishedAt), val(j.ExitCode), j.Output, j.Error}
}

func testQueuesAndLimits(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	Apply(t, s,
		jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "b", Priority: 1}},
		jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "a", Retry: jobtype.RetryPolicy{MaxAttempts: 3, BackoffMs: 10}}},
		jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "c"}},
		jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "b", Priority: 5, Requires: []string{"gpu"}, Order: "strict", StrictStart: true}},
		jobs.Op{Kind: jobs.OpDeleteQueue, Name: "c"},
		jobs.Op{Kind: jobs.OpDeleteQueue, Name: "never"},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "x", Limit: 1}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "y*", Limit: 2}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "x", Limit: 4}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "y*", Limit: 0}},
		// Rates: alone, with a limit, replaced, and removed with the limit.
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "api:*", Rate: "100/s", Burst: 20}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "db", Limit: 2, Rate: "10/h", Burst: 1}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "z", Rate: "6000/m", Burst: 3}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "z", Limit: 0}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "x", Limit: 4, Rate: "5/s", Burst: 2}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "x", Limit: 4}},
	)
	snap := load(t, s)
	got := fmt.Sprintf("%+v %+v", snap.Queues, snap.Limits)
	want := fmt.Sprintf("%+v %+v", []jobtype.Queue{{Name: "a", Retry: jobtype.RetryPolicy{MaxAttempts: 3, BackoffMs: 10}},
		{Name: "b", Priority: 5, Requires: []string{"gpu"}, Order: "strict", StrictStart: true}}, []jobtype.KeyLimit{
		{Pattern: "api:*", Rate: "100/s", Burst: 20}, {Pattern: "db", Limit: 2, Rate: "10/h", Burst: 1}, {Pattern: "x", Limit: 4}})
	if got != want {
		t.Fatalf("queues and limits\n got %s\nwant %s", got, want)
	}
}

// Changes to jobs that do not exist change nothing; reads of them say
// ErrNotFound.
func testMissingJobs(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	now := time.UnixMilli(1700000300000)
	Apply(t, s,
		jobs.Op{Kind: jobs.OpStart, ID: 9, Attempt: 1, Agent: "a", At: now},
		jobs.Op{Kind: jobs.OpRequeue, ID: 9, At: now},
		jobs.Op{Kind: jobs.OpFinish, ID: 9, State: jobtype.StateSucceeded, At: now, Result: &jobtype.Result{}},
		jobs.Op{Kind: jobs.OpReset, ID: 9, At: now},
	)
	if _, err := s.Job(context.Background(), 9); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("Job(9) = %v; want ErrNotFound", err)
	}
	if _, err := s.WorkflowInfo(context.Background(), 9); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("WorkflowInfo(9) = %v; want ErrNotFound", err)
	}
	page, err := s.Jobs(context.Background(), jobs.Filter{Limit: 10})
	list := page.Jobs
	if err != nil || len(list) != 0 || list == nil {
		t.Fatalf("Jobs = %v, %v; want an empty list", list, err)
	}
	if snap := load(t, s); len(snap.Jobs) != 0 || snap.NextJob != 1 {
		t.Fatalf("Load = %+v; want nothing", snap)
	}
}

// Listing pages in id order through every combination of filters.
func testListing(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	now := time.UnixMilli(1700000400000)
	Apply(t, s, jobs.Op{Kind: jobs.OpWorkflow, ID: 1, Name: "w1", At: now}, jobs.Op{Kind: jobs.OpWorkflow, ID: 2, Name: "w2", At: now})
	type model struct {
		queue string
		wf    int64
		state jobtype.State
	}
	all := map[int64]model{}
	var ops []jobs.Op
	states := []jobtype.State{jobtype.StateQueued, jobtype.StateRunning, jobtype.StateSucceeded, jobtype.StateFailed, jobtype.StateCancelled}
	for id := int64(1); id <= 120; id++ {
		m := model{queue: []string{"a", "b", "c"}[id%3], wf: id % 4 % 3, state: states[id%5]}
		all[id] = m
		ops = append(ops, InsertIn(m.queue, m.wf, id))
		if m.state != jobtype.StateQueued {
			ops = append(ops, jobs.Op{Kind: jobs.OpStart, ID: id, Attempt: 1, Agent: "a", At: now})
		}
		if m.state.Final() {
			ops = append(ops, jobs.Op{Kind: jobs.OpFinish, ID: id, State: m.state, At: now})
		}
	}
	Apply(t, s, ops...)
	filters := []jobs.Filter{{}, {Queue: "a"}, {State: jobtype.StateRunning}, {Workflow: "1"}, {Queue: "b", State: jobtype.StateQueued},
		{Queue: "c", Workflow: "2"}, {Queue: "a", State: jobtype.StateFailed, Workflow: "2"}, {State: jobtype.StateCancelled, Workflow: "1"},
		{Queue: "none"}, {Workflow: "3"}, {Workflow: "x"}, {State: "bogus"}, {State: jobtype.StateSucceeded}}
	for _, f := range filters {
		var want []string
		for id := int64(1); id <= 120; id++ {
			m := all[id]
			if (f.Queue == "" || f.Queue == m.queue) && (f.State == "" || f.State == m.state) &&
				(f.Workflow == "" || f.Workflow == fmt.Sprint(m.wf)) {
				want = append(want, fmt.Sprint(id))
			}
		}
		for _, limit := range []int{1, 7, 1000} {
			got := pages(t, s, f, limit)
			if !slices.Equal(got, want) {
				t.Errorf("filter %+v in pages of %d: %v; want %v", f, limit, got, want)
			}
		}
	}
	page, err := s.Jobs(context.Background(), jobs.Filter{State: jobtype.StateRunning, After: 50, Limit: 3})
	list := page.Jobs
	if err != nil || len(list) != 3 || list[0].ID != "51" || list[0].State != jobtype.StateRunning || list[0].Agent != "a" {
		t.Fatalf("running after 50, 3 of them = %+v, %v", list, err)
	}
}

// pages lists every job f selects, limit at a time, following each
// page's cursor; a page never holds more than limit jobs.
func pages(t *testing.T, s jobs.Store, f jobs.Filter, limit int) []string {
	t.Helper()
	var ids []string
	f.Limit = limit
	for range 100000 {
		page, err := s.Jobs(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) > limit {
			t.Fatalf("a page of %d jobs; the limit is %d", len(page.Jobs), limit)
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == 0 {
			return ids
		}
		if page.Next == f.After {
			t.Fatalf("filter %+v: the cursor stays at %d", f, f.After)
		}
		f.After = page.Next
	}
	t.Fatalf("filter %+v: no last page", f)
	return nil
}

// Pruning deletes jobs that finished before the cut and nothing else,
// and the workflows left without jobs that were created before it.
func testPrune(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	old, now := time.Now().Add(-10*24*time.Hour), time.Now()
	Apply(t, s,
		jobs.Op{Kind: jobs.OpWorkflow, ID: 1, Name: "old, all pruned", At: old},
		jobs.Op{Kind: jobs.OpWorkflow, ID: 2, Name: "old, a job stays", At: old},
		jobs.Op{Kind: jobs.OpWorkflow, ID: 3, Name: "new, empty", At: now},
		jobs.Op{Kind: jobs.OpWorkflow, ID: 4, Name: "old, empty", At: old},
		InsertIn("q", 1, 1), Insert(2), Insert(3), Insert(4, 1), InsertIn("q", 2, 5), InsertIn("q", 2, 6),
		jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateSucceeded, At: old},
		jobs.Op{Kind: jobs.OpFinish, ID: 3, State: jobtype.StateFailed, At: now},
		jobs.Op{Kind: jobs.OpFinish, ID: 5, State: jobtype.StateCancelled, At: old},
		Insert(7), jobs.Op{Kind: jobs.OpFinish, ID: 7, State: jobtype.StateFailed, At: old}, jobs.Op{Kind: jobs.OpReset, ID: 7, At: now},
		jobs.Op{Kind: jobs.OpPrune, At: now.Add(-7 * 24 * time.Hour)})
	for id, want := range map[int64]bool{1: false, 2: true, 3: true, 4: true, 5: false, 6: true, 7: true} {
		_, err := s.Job(context.Background(), id)
		if got := err == nil; got != want {
			t.Errorf("job %d kept = %v (%v); want %v", id, got, err, want)
		}
		if err != nil && !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("job %d: %v", id, err)
		}
	}
	for id, want := range map[int64]bool{1: false, 2: true, 3: true, 4: false} {
		_, err := s.WorkflowInfo(context.Background(), id)
		if got := err == nil; got != want {
			t.Errorf("workflow %d kept = %v (%v); want %v", id, got, err, want)
		}
	}
	for _, f := range []jobs.Filter{{}, {Queue: "q"}, {Workflow: "2"}, {State: jobtype.StateCancelled}} {
		got := pages(t, s, f, 100)
		want := map[string][]string{"": {"2", "3", "4", "6", "7"}, "2": {"6"}, "cancelled": {}}[f.Workflow+string(f.State)]
		if f.Queue == "q" {
			want = []string{"2", "3", "4", "6", "7"}
		}
		if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
			t.Errorf("after pruning, filter %+v lists %v; want %v", f, got, want)
		}
	}
	snap := load(t, s)
	if len(snap.Jobs) != 4 || snap.Jobs[1].ID != 4 || !slices.Equal(snap.Jobs[1].After, nil) || snap.Jobs[3].ID != 7 {
		t.Errorf("after pruning Load = %+v; want jobs 2, 4 (its dependency gone), 6 and 7 (reset)", snap.Jobs)
	}
}

// Ids of pruned jobs and workflows are not handed out again, even when
// the pruned ones were the newest: a client that kept "job-3" must never
// read another job under it.
func testPrunedIDs(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	old := time.Now().Add(-10 * 24 * time.Hour)
	Apply(t, s, jobs.Op{Kind: jobs.OpWorkflow, ID: 1, Name: "w", At: old},
		Insert(1), InsertIn("q", 1, 2), InsertIn("q", 1, 3))
	for id := int64(1); id <= 3; id++ {
		Apply(t, s, jobs.Op{Kind: jobs.OpFinish, ID: id, State: jobtype.StateSucceeded, At: old})
	}
	Apply(t, s, jobs.Op{Kind: jobs.OpPrune, At: time.Now().Add(-7 * 24 * time.Hour)})
	snap := load(t, s)
	if len(snap.Jobs) != 0 {
		t.Fatalf("after pruning every job Load has %d jobs", len(snap.Jobs))
	}
	if snap.NextJob < 4 || snap.NextWorkflow < 2 {
		t.Errorf("after pruning jobs 1–3 and workflow 1, Load gives next ids job %d, workflow %d; want at least 4 and 2",
			snap.NextJob, snap.NextWorkflow)
	}
}

// A retry reads a finished job, then resets it. A prune that deleted the
// job (and its workflow, whose last job it was) in between comes first
// in the store's order: the reset then writes both anew from its record,
// and a reset of a job still there changes only its state.
func testResetAfterPrune(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	old, now := time.Now().Add(-10*24*time.Hour), time.Now()
	pruned, kept := InsertIn("q", 1, 1, 9), InsertIn("q", 2, 2)
	Apply(t, s, jobs.Op{Kind: jobs.OpWorkflow, ID: 1, Name: "gone", At: old}, jobs.Op{Kind: jobs.OpWorkflow, ID: 2, Name: "kept", At: old},
		pruned, kept, Insert(9),
		jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateFailed, At: old},
		jobs.Op{Kind: jobs.OpFinish, ID: 2, State: jobtype.StateFailed, At: now, Result: &jobtype.Result{ExitCode: 3, Error: "boom"}})
	before := job(t, s, 1)
	Apply(t, s, jobs.Op{Kind: jobs.OpPrune, At: now.Add(-7 * 24 * time.Hour)})
	if _, err := s.Job(context.Background(), 1); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("job 1 after the prune: %v; want not found", err)
	}
	Apply(t, s, jobs.Op{Kind: jobs.OpReset, ID: 1, At: now, Record: pruned.Record, Name: "gone"},
		jobs.Op{Kind: jobs.OpReset, ID: 2, At: now, Record: kept.Record, Name: "kept"})
	want := before
	want.State, want.Attempt, want.FinishedAt, want.ExitCode, want.Output, want.Error = jobtype.StateQueued, 0, nil, nil, "", ""
	if d := diffJobs(job(t, s, 1), want); d != "" {
		t.Errorf("job 1 reset after its prune: %s", d)
	}
	if j := job(t, s, 2); j.State != jobtype.StateQueued || j.ExitCode != nil || j.Error != "" || j.Workflow != "2" {
		t.Errorf("job 2 reset in place: %+v; want queued in workflow 2, its result cleared", j)
	}
	for id, want := range map[int64]string{1: "gone", 2: "kept"} {
		if name, err := s.WorkflowInfo(context.Background(), id); err != nil || name != want {
			t.Errorf("workflow %d: %q, %v; want %q", id, name, err, want)
		}
	}
	snap := load(t, s)
	if len(snap.Jobs) != 3 || snap.Jobs[0].ID != 1 || !slices.Equal(snap.Jobs[0].After, []int64{9}) || snap.Jobs[0].Workflow != 1 {
		t.Errorf("Load after the resets = %+v; want jobs 1 (after 9, in workflow 1), 2 and 9", snap.Jobs)
	}
	if got := pages(t, s, jobs.Filter{Workflow: "1"}, 10); !slices.Equal(got, []string{"1"}) {
		t.Errorf("jobs of workflow 1: %v; want [1]", got)
	}
}

// Changes are written in the order they were appended, also when many
// goroutines append at once and wait only at the end.
func testOrder(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	now := time.UnixMilli(1700000500000)
	const n = 200
	var last jobs.Pending
	for id := int64(1); id <= n; id++ {
		s.Append(Insert(id))
		s.Append(jobs.Op{Kind: jobs.OpStart, ID: id, Attempt: 1, Agent: "a", At: now})
		last = s.Append(jobs.Op{Kind: jobs.OpFinish, ID: id, State: jobtype.StateSucceeded, At: now, Result: &jobtype.Result{Output: fmt.Sprint(id)}})
	}
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, n)
	for id := int64(n + 1); id <= 2*n; id++ {
		go func() {
			done <- s.Append(Insert(id), jobs.Op{Kind: jobs.OpStart, ID: id, Attempt: 2, Agent: "b", At: now}).Wait(context.Background())
		}()
	}
	for i := range n {
		if err := testwait.Receive(t, 30*time.Second, done, "commit %d of %d concurrent starts", i+1, n); err != nil {
			t.Fatal(err)
		}
	}
	for id := int64(1); id <= 2*n; id++ {
		j := job(t, s, id)
		if id <= n && (j.State != jobtype.StateSucceeded || j.Output != fmt.Sprint(id)) ||
			id > n && (j.State != jobtype.StateRunning || j.Attempt != 2) {
			t.Fatalf("job %d = %+v", id, j)
		}
	}
}

// Close writes what was appended before it; a store opened after on the
// same data reads it all.
func testClose(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	var ops []jobs.Op
	for id := int64(1); id <= 500; id++ {
		ops = append(ops, Insert(id))
		s.Append(ops[len(ops)-1])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(Insert(501)).Wait(context.Background()); err == nil {
		t.Fatal("a change appended after Close was accepted")
	}
	snap := load(t, open(t))
	if len(snap.Jobs) != 500 || snap.NextJob != 501 {
		t.Fatalf("after Close, a new store loads %d jobs, next %d; want 500, 501", len(snap.Jobs), snap.NextJob)
	}
}
