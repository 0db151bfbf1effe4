package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/jobtype"
)

// A job's attempts that end without success are kept, oldest first, with
// their agent, times, exit code, error and output's tail, the last
// jobtype.MaxAttemptHistory of them; a success, an attempt that never
// reached its agent and the cancel of a queued job add none; a listing
// leaves the history out.
func testAttemptHistory(t *testing.T, open func(t *testing.T) jobs.Store) {
	s := open(t)
	at := func(sec int) time.Time { return time.UnixMilli(1700000000000).Add(time.Duration(sec) * time.Second) }
	long := strings.Repeat("x", 3000) + "é" + strings.Repeat("y", jobtype.MaxAttemptOutput-2)
	Apply(t, s, Insert(1), Insert(2),
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 1, Agent: "a1", At: at(1)},
		jobs.Op{Kind: jobs.OpRequeue, ID: 1, At: at(60), Ended: at(2), Result: &jobtype.Result{ExitCode: 3, Output: long, Error: "exit status 3"}},
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 2, Agent: "a2", At: at(61)},
		jobs.Op{Kind: jobs.OpRequeue, ID: 1, At: at(62)}, // never reached its agent
		jobs.Op{Kind: jobs.OpStart, ID: 1, Attempt: 2, Agent: "a2", At: at(63)},
		jobs.Op{Kind: jobs.OpFinish, ID: 1, State: jobtype.StateFailed, At: at(70), Result: &jobtype.Result{ExitCode: 1, Error: "boom"}},
		jobs.Op{Kind: jobs.OpFinish, ID: 2, State: jobtype.StateCancelled, At: at(5)})
	j := job(t, s, 1)
	if len(j.Attempts) != 2 {
		t.Fatalf("history of job 1 = %+v; want 2 attempts", j.Attempts)
	}
	first, second := j.Attempts[0], j.Attempts[1]
	if first.Attempt != 1 || first.Agent != "a1" || first.StartedAt == nil || !first.StartedAt.Equal(at(1)) ||
		!first.EndedAt.Equal(at(2)) || first.ExitCode == nil || *first.ExitCode != 3 || first.Error != "exit status 3" {
		t.Errorf("first attempt = %+v", first)
	}
	if len(first.Output) > jobtype.MaxAttemptOutput || !strings.HasSuffix(long, first.Output) || !strings.HasPrefix(first.Output, "é") && len(first.Output) < 1000 {
		t.Errorf("first attempt's output: %d bytes, %.20q…; want the last %d bytes or fewer", len(first.Output), first.Output, jobtype.MaxAttemptOutput)
	}
	if second.Attempt != 2 || second.Agent != "a2" || !second.EndedAt.Equal(at(70)) || second.Error != "boom" {
		t.Errorf("second attempt = %+v", second)
	}
	if h := job(t, s, 2).Attempts; len(h) != 0 {
		t.Errorf("a queued job's cancel left history %+v", h)
	}
	page, err := s.Jobs(t.Context(), jobs.Filter{Limit: 10})
	if err != nil || len(page.Jobs) != 2 || page.Jobs[0].Attempts != nil {
		t.Fatalf("listing = %+v, %v; want both jobs without their history", page.Jobs, err)
	}
	var ops []jobs.Op
	for n := 1; n <= jobtype.MaxAttemptHistory+5; n++ {
		ops = append(ops, jobs.Op{Kind: jobs.OpStart, ID: 3, Attempt: n, Agent: "a", At: at(100 + 2*n)},
			jobs.Op{Kind: jobs.OpRequeue, ID: 3, At: at(101 + 2*n), Ended: at(101 + 2*n), Result: &jobtype.Result{ExitCode: 1, Error: "try"}})
	}
	Apply(t, s, append([]jobs.Op{Insert(3)}, ops...)...)
	h := job(t, s, 3).Attempts
	if len(h) != jobtype.MaxAttemptHistory || h[0].Attempt != 6 || h[len(h)-1].Attempt != jobtype.MaxAttemptHistory+5 {
		t.Errorf("a long history kept %d attempts, %d to %d; want the last %d", len(h), h[0].Attempt, h[len(h)-1].Attempt, jobtype.MaxAttemptHistory)
	}
}
