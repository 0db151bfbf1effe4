package sqlitejobs

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/sqlitedb"
	"github.com/usherhq/usher/jobtype"
)

func open(t testing.TB, path string) *Store {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); db.Close() })
	return s
}

func apply(t *testing.T, s *Store, ops ...jobs.Op) {
	t.Helper()
	if err := s.Append(ops...).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func insert(id int64, after ...int64) jobs.Op {
	return jobs.Op{Kind: jobs.OpInsert, Record: &jobs.Record{ID: id, Spec: jobtype.JobSpec{Queue: "q", Tier: "fast", Payload: []byte(`"p"`)},
		After: after, CreatedAt: time.Now()}}
}

// Load gives back what the changes left: the queue, the limit, the
// unfinished jobs in id order with their unfinished dependencies and
// whether they ran, and the next ids.
func TestLoadRebuildsFromChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usher.db")
	s := open(t, path)
	now := time.Now()
	apply(t, s,
		jobs.Op{Kind: jobs.OpPutQueue, Queue: &jobtype.Queue{Name: "q", Order: "strict", Active: true}},
		jobs.Op{Kind: jobs.OpPutLimit, Limit: &jobtype.KeyLimit{Pattern: "net:*", Limit: 3}},
		jobs.Op{Kind: jobs.OpWorkflow, ID: 1, Name: "w", At: now},
		insert(1), insert(2, 1), insert(3, 1, 2), insert(4),
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "a", At: now},
		jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateSucceeded, At: now, Result: &jobtype.Result{Output: "ok"}},
		jobs.Op{Kind: jobs.OpStart, ID: 2, Attempt: 1, Agent: "a", At: now},
		jobs.Op{Kind: jobs.OpFinish, ID: 4, State: jobtype.StateCancelled, At: now},
	)
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Queues) != 1 || snap.Queues[0].Order != "strict" || len(snap.Limits) != 1 || snap.Limits[0].Limit != 3 {
		t.Fatalf("queues %v limits %v", snap.Queues, snap.Limits)
	}
	if snap.NextJob != 5 || snap.NextWorkflow != 2 {
		t.Fatalf("next ids %d %d; want 5 2", snap.NextJob, snap.NextWorkflow)
	}
	if len(snap.Jobs) != 2 || snap.Jobs[0].ID != 2 || !snap.Jobs[0].Running || snap.Jobs[0].Attempt != 1 ||
		snap.Jobs[1].ID != 3 || !slices.Equal(snap.Jobs[1].After, []int64{2}) || string(snap.Jobs[1].Spec.Payload) != `"p"` {
		t.Fatalf("unfinished jobs = %+v; want 2 (running, attempt 1) and 3 after 2 only", snap.Jobs)
	}
	j, err := s.Job(context.Background(), 1)
	if err != nil || j.State != jobtype.StateSucceeded || j.Output != "ok" || j.Agent != "a" || j.StartedAt == nil {
		t.Fatalf("job 1 = %+v, %v", j, err)
	}
}

// Pruning deletes jobs that finished before the cut and nothing else.
func TestPruneDeletesOnlyOldFinishedJobs(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "usher.db"))
	old, now := time.Now().Add(-10*24*time.Hour), time.Now()
	apply(t, s, insert(1), insert(2), insert(3), insert(4, 1),
		jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateSucceeded, At: old},
		jobs.Op{Kind: jobs.OpFinish, ID: 3, State: jobtype.StateFailed, At: now},
		jobs.Op{Kind: jobs.OpPrune, At: now.Add(-7 * 24 * time.Hour)})
	for id, want := range map[int64]bool{1: false, 2: true, 3: true, 4: true} {
		_, err := s.Job(context.Background(), id)
		if got := err == nil; got != want {
			t.Errorf("job %d kept = %v (%v); want %v", id, got, err, want)
		}
		if err != nil && !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("job %d: %v", id, err)
		}
	}
}

// Runs of starts of one lease answer and of plain successes are written
// in one statement each: every job of the run gets its own attempt and
// state, and a success with output in the middle ends the run.
func TestRunsOfStartsAndSuccesses(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "usher.db"))
	now := time.Now()
	ok := &jobtype.Result{}
	apply(t, s, insert(1), insert(2), insert(3), insert(4),
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "a", At: now},
		jobs.Op{Kind: jobs.OpStart, ID: 2, Attempt: 3, Agent: "a", At: now},
		jobs.Op{Kind: jobs.OpStart, ID: 3, Attempt: 2, Agent: "a", At: now},
		jobs.Op{Kind: jobs.OpStart, ID: 4, Attempt: 1, Agent: "b", At: now},
		jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateSucceeded, At: now, Result: ok},
		jobs.Op{Kind: jobs.OpFinish, ID: 2, State: jobtype.StateSucceeded, At: now, Result: &jobtype.Result{Output: "said"}},
		jobs.Op{Kind: jobs.OpFinish, ID: 3, State: jobtype.StateSucceeded, At: now, Result: ok},
		jobs.Op{Kind: jobs.OpFinish, ID: 4, State: jobtype.StateSucceeded, At: now, Result: ok},
	)
	want := map[int64]struct {
		attempt int
		agent   string
		output  string
	}{1: {1, "a", ""}, 2: {3, "a", "said"}, 3: {2, "a", ""}, 4: {1, "b", ""}}
	for id, w := range want {
		j, err := s.Job(context.Background(), id)
		if err != nil || j.State != jobtype.StateSucceeded || j.Attempt != w.attempt || j.Agent != w.agent || j.Output != w.output ||
			j.ExitCode == nil || *j.ExitCode != 0 {
			t.Errorf("job %d = %+v, %v; want succeeded at attempt %d by %s with output %q", id, j, err, w.attempt, w.agent, w.output)
		}
	}
}
