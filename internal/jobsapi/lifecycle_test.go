package jobsapi_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/jobtype"
)

// An agent that stops renewing loses its jobs when its lease lapses, and
// another agent gets them as the next attempt; the first agent's late
// report is ignored.
func TestLeaseLapseRetriesOnAnotherAgent(t *testing.T) {
	s := jobsapitest.StartWith(t, jobsapitest.Options{LeaseTTL: 300 * time.Millisecond})
	queue(t, s, map[string]any{"name": "q", "retry": map[string]any{"maxAttempts": 3}})
	id := enqueue(t, s, map[string]any{"queue": "q"})[0]
	dead := lease(t, s, "doomed", nil, 1, 1)
	if len(dead) != 1 {
		t.Fatalf("first agent got %v", dead)
	}
	// The second agent waits for work (each wait is capped at half a
	// lease); the lapse hands it the job.
	var got []leasedJob
	testwait.Eventually(t, 10*time.Second, func() bool {
		got = leaseWait(t, s, "survivor", nil, 1, 1, 5000)
		return len(got) > 0
	}, "the second agent leasing the lapsed job")
	if len(got) != 1 || got[0].ID != id || got[0].Attempt != 2 {
		t.Fatalf("survivor got %v; want job %s at attempt 2", got, id)
	}
	if acks := complete(t, s, "doomed", 0, dead...); !acks[0].Ignored {
		t.Fatalf("the lapsed agent's late report was accepted: %v", acks)
	}
	complete(t, s, "survivor", 0, got...)
	job := must(t, s, "GET", "/v1/jobs/"+id, nil, 200)
	if job["state"] != "succeeded" || job["agent"] != "survivor" || job["attempt"] != 2.0 {
		t.Fatalf("job = %v; want succeeded by survivor at attempt 2", job)
	}
	status, _ := call(t, s, s.AdminToken, "POST", "/v1/agent/renew", map[string]any{"agent": "doomed"})
	if status != 404 {
		t.Fatalf("renew of a lapsed agent = %d; want 404", status)
	}
	checkIdle(t, s)
}

// A waiting lease request is answered as soon as a job arrives.
func TestLongPollWakesOnEnqueue(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	got := make(chan []leasedJob, 1)
	go func() { got <- leaseWait(t, s, "a", nil, 1, 1, 10000) }()
	// The request is waiting once the engine counts a waiter; enqueueing
	// before that would also be answered, so no ordering is needed.
	start := time.Now()
	id := enqueue(t, s, map[string]any{"queue": "q"})[0]
	select {
	case js := <-got:
		if len(js) != 1 || js[0].ID != id {
			t.Fatalf("long poll got %v; want job %s", js, id)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("long poll answered after %s", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long poll not answered")
	}
}

// Cancelling a running job frees its slot at once and tells its agent to
// stop at the next renewal; the agent's report is ignored.
func TestCancelRunningJobStopsItAtRenew(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	ids := enqueue(t, s, map[string]any{"queue": "q"}, map[string]any{"queue": "q"})
	first := lease(t, s, "a", nil, 1, 1)
	job := must(t, s, "POST", "/v1/jobs/"+first[0].ID+"/cancel", nil, 200)
	if job["state"] != "cancelled" {
		t.Fatalf("cancelled job state = %v", job["state"])
	}
	renew := mustAs[jobtype.RenewAnswer](t, s, "POST", "/v1/agent/renew", map[string]any{"agent": "a"}, 200)
	if stop := renew.Stop; len(stop) != 1 || stop[0].ID != first[0].ID {
		t.Fatalf("renew = %v; want the cancelled job in stop", renew)
	}
	if next := lease(t, s, "a", nil, 1, 1); len(next) != 1 || next[0].ID != ids[1] {
		t.Fatalf("the slot was not freed: next lease = %v", next)
	}
	if acks := complete(t, s, "a", 0, first...); !acks[0].Ignored {
		t.Fatalf("report of a cancelled job = %v; want ignored", acks)
	}
}

// A failed job is retried by its policy with backoff, then fails; retry
// queues it again with fresh attempts.
func TestRetryPolicyThenManualRetry(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q", "retry": map[string]any{"maxAttempts": 2}})
	id := enqueue(t, s, map[string]any{"queue": "q"})[0]
	for attempt := 1; attempt <= 2; attempt++ {
		got := lease(t, s, "a", nil, 1, 1)
		if len(got) != 1 || got[0].Attempt != attempt {
			t.Fatalf("attempt %d: lease = %v", attempt, got)
		}
		complete(t, s, "a", 3, got...)
	}
	job := must(t, s, "GET", "/v1/jobs/"+id, nil, 200)
	if job["state"] != "failed" || job["exitCode"] != 3.0 || job["maxAttempts"] != 2.0 {
		t.Fatalf("job = %v; want failed with exit code 3 after 2 attempts", job)
	}
	if job := must(t, s, "POST", "/v1/jobs/"+id+"/retry", nil, 200); job["state"] != "queued" {
		t.Fatalf("retried job = %v; want queued", job)
	}
	got := lease(t, s, "a", nil, 1, 1)
	if len(got) != 1 || got[0].Attempt != 1 {
		t.Fatalf("after a manual retry lease = %v; want attempt 1", got)
	}
}

// Queued, running and finished jobs survive a restart: the queued job is
// still there, the running one runs again as a later attempt, the
// finished one keeps its result.
func TestStateSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usher.db")
	s := jobsapitest.StartAt(t, path, jobsapitest.Options{})
	queue(t, s, map[string]any{"name": "q", "priority": 3, "order": "strict"})
	must(t, s, "PUT", "/v1/limits", map[string]any{"pattern": "net:*", "limit": 4}, 200)
	ids := enqueue(t, s, map[string]any{"queue": "q", "payload": "one"}, map[string]any{"queue": "q", "payload": "two"}, map[string]any{"queue": "q", "payload": "three"})
	done := lease(t, s, "a", nil, 1, 1)
	complete(t, s, "a", 0, done...)
	running := lease(t, s, "a", nil, 1, 1)

	copyPath := filepath.Join(t.TempDir(), "copy.db")
	copyDB(t, path, copyPath) // as a crash would leave it: no clean shutdown
	r := jobsapitest.StartAt(t, copyPath, jobsapitest.Options{})
	if q := must(t, r, "GET", "/v1/queues/q", nil, 200); q["order"] != "strict" || q["priority"] != 3.0 {
		t.Fatalf("queue after restart = %v", q)
	}
	// Raw JSON: the field names of the limits on the wire are checked too.
	if l := must(t, r, "GET", "/v1/limits", nil, 200); toJSON(l["limits"]) != `[{"limit":4,"pattern":"net:*"}]` {
		t.Fatalf("limits after restart = %v", l)
	}
	if st := jobState(t, r, ids[0]); st != "succeeded" {
		t.Fatalf("finished job after restart: %s", st)
	}
	got := lease(t, r, "b", nil, 5, 5)
	if want := []string{ids[1], ids[2]}; !slices.Equal(idsOf(got), want) || got[0].Attempt != running[0].Attempt+1 {
		t.Fatalf("after restart lease = %v; want %v with the running one at attempt %d", got, want, running[0].Attempt+1)
	}
	if acks := complete(t, r, "a", 0, running...); !acks[0].Ignored {
		t.Fatalf("the interrupted attempt's report = %v; want ignored", acks)
	}
	complete(t, r, "b", 0, got...)
	checkIdle(t, r)
	if next := enqueue(t, r, map[string]any{"queue": "q"})[0]; next <= ids[2] && len(next) <= len(ids[2]) {
		t.Fatalf("a new job after restart got id %s, not after %s", next, ids[2])
	}
}

func idsOf(js []leasedJob) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// copyDB copies a SQLite file and its write-ahead log while the server
// runs, as the files would be after a kill.
func copyDB(t *testing.T, from, to string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(from + suffix)
		if err != nil {
			if suffix != "" && os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		if err := os.WriteFile(to+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Duration tiers hold for generic jobs
// (docs/design.md, "Duration tiers and preemption"): an elastic
// ("default") job starts in the slowest tier free, and when a slow job
// needs that tier it is moved to the fast one; its agent learns the
// shorter limit at its next renewal.
func TestDefaultJobDowngradeReachesItsAgent(t *testing.T) {
	tiers, err := jobs.ParseTiers("fast=1m,slow=10m@1")
	if err != nil {
		t.Fatal(err)
	}
	s := jobsapitest.StartWith(t, jobsapitest.Options{Tiers: tiers})
	queue(t, s, map[string]any{"name": "q"})
	elastic := enqueue(t, s, map[string]any{"queue": "q", "tier": "default"})[0]
	first := mustAs[jobtype.LeaseAnswer](t, s, "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 2, "max": 1}, 200)
	if len(first.Jobs) == 0 {
		t.Fatalf("lease = %+v; want the elastic job", first)
	}
	if j := first.Jobs[0]; j.ID != elastic || j.TimeoutMs != 600000 {
		t.Fatalf("elastic job leased as %v; want it in the slow tier (600000 ms)", j)
	}
	slow := enqueue(t, s, map[string]any{"queue": "q", "tier": "slow"})[0]
	if got := lease(t, s, "a", nil, 2, 1); len(got) != 1 || got[0].ID != slow {
		t.Fatalf("the slow job did not start in the freed tier: %v", got)
	}
	// Raw JSON: the timeouts' exact wire form (names, no extra fields).
	renew := must(t, s, "POST", "/v1/agent/renew", map[string]any{"agent": "a"}, 200)
	want := `[{"attempt":1,"id":"` + elastic + `","timeoutMs":60000}]`
	if got := toJSON(renew["timeouts"]); got != want {
		t.Fatalf("renew timeouts = %s; want %s", got, want)
	}
	stats := mustAs[jobtype.Stats](t, s, "GET", "/v1/stats", nil, 200)
	if c := stats.Counters; c.Downgrades != 1 {
		t.Fatalf("counters = %v; want one downgrade", c)
	}
}

// Jobs leased to an agent whose connection broke before the answer was
// written go back to the queue at once, their attempts not counted.
func TestUnleasedJobsGoBackUncounted(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	id := enqueue(t, s, map[string]any{"queue": "q"})[0]
	got := lease(t, s, "a", nil, 1, 1)
	s.Engine.Unlease([]jobtype.LeasedJob{{ID: got[0].ID, Attempt: got[0].Attempt}})
	if st := jobState(t, s, id); st != "queued" {
		t.Fatalf("unleased job is %s; want queued", st)
	}
	again := lease(t, s, "b", nil, 1, 1)
	if len(again) != 1 || again[0].ID != id || again[0].Attempt != 1 {
		t.Fatalf("next lease = %v; want job %s at attempt 1", again, id)
	}
	complete(t, s, "b", 0, again...)
	checkIdle(t, s)
}

// An agent that lists the jobs it holds gets back, as new work, a job the
// server leased to it whose answer it never received; jobs it does hold
// stay its own.
func TestLeaseHoldingHandsBackLostJobs(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	ids := enqueue(t, s, map[string]any{"queue": "q"}, map[string]any{"queue": "q"})
	got := lease(t, s, "a", nil, 2, 2) // both answers "lost" but the first
	kept := got[0]
	out := mustAs[jobtype.LeaseAnswer](t, s, "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 2, "max": 1,
		"holding": []any{map[string]any{"id": kept.ID, "attempt": kept.Attempt}}}, 200)
	again := out.Jobs
	if len(again) != 1 || again[0].ID != ids[1] || again[0].Attempt != 1 {
		t.Fatalf("lease with holding = %v; want job %s again at attempt 1", again, ids[1])
	}
	if st := jobState(t, s, kept.ID); st != "running" {
		t.Fatalf("the held job is %s; want running", st)
	}
}

// A job waiting out a retry's backoff still waits after a restart.
func TestRetryBackoffSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usher.db")
	s := jobsapitest.StartAt(t, path, jobsapitest.Options{})
	queue(t, s, map[string]any{"name": "q", "retry": map[string]any{"maxAttempts": 2, "backoff": map[string]any{"policy": "constant", "baseMs": 3600000}}})
	id := enqueue(t, s, map[string]any{"queue": "q"})[0]
	complete(t, s, "a", 1, lease(t, s, "a", nil, 1, 1)...)
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	copyDB(t, path, copyPath)
	r := jobsapitest.StartAt(t, copyPath, jobsapitest.Options{})
	if st := jobState(t, r, id); st != "delayed" {
		t.Fatalf("after a restart the job is %s; want delayed", st)
	}
	if got := lease(t, r, "b", nil, 1, 1); len(got) != 0 {
		t.Fatalf("a job an hour from its retry was leased at once: %v", got)
	}
}

// A queue with running jobs can be neither deleted nor flushed; once idle,
// flushing cancels its queued jobs and deleting removes it.
func TestDeleteAndFlushRefusedWhileRunning(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	ids := enqueue(t, s, map[string]any{"queue": "q"}, map[string]any{"queue": "q"}, map[string]any{"queue": "q"})
	running := lease(t, s, "a", nil, 1, 1)
	for _, c := range []struct{ method, path string }{{"DELETE", "/v1/queues/q"}, {"POST", "/v1/queues/q/flush"}} {
		if status, out := call(t, s, s.AdminToken, c.method, c.path, nil); status != 409 || !strings.Contains(out["error"].(string), "running") {
			t.Fatalf("%s %s with a running job = %d %v; want 409", c.method, c.path, status, out)
		}
	}
	complete(t, s, "a", 0, running...)
	if out := must(t, s, "POST", "/v1/queues/q/flush", nil, 200); out["cancelled"] != 2.0 {
		t.Fatalf("flush = %v; want 2 cancelled", out)
	}
	must(t, s, "DELETE", "/v1/queues/q", nil, 204)
	must(t, s, "GET", "/v1/queues/q", nil, 404)
	if st := jobState(t, s, ids[2]); st != "cancelled" {
		t.Fatalf("flushed job is %s", st)
	}
	checkIdle(t, s)
}

// Listing filters by queue and state and pages in id order.
func TestListFiltersAndPages(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "a"})
	queue(t, s, map[string]any{"name": "b"})
	var inA []string
	for i := range 5 {
		inA = append(inA, enqueue(t, s, map[string]any{"queue": "a"})[0])
		enqueue(t, s, map[string]any{"queue": "b", "payload": i})
	}
	out := mustAs[jobtype.LeaseAnswer](t, s, "POST", "/v1/agent/lease", map[string]any{"agent": "x", "slots": 1, "queues": []string{"a"}}, 200)
	if len(out.Jobs) == 0 {
		t.Fatal("no job of queue a leased")
	}
	complete(t, s, "x", 0, leasedJob{ID: out.Jobs[0].ID, Attempt: 1}) // a's first job succeeds
	var seen []string
	next := ""
	for page := 0; page < 5; page++ {
		out := mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs?queue=a&limit=2&after="+next, nil, 200)
		for _, j := range out.Jobs {
			seen = append(seen, j.ID)
		}
		n := out.Next
		if n == "" { // absent on the last page
			break
		}
		next = n
	}
	if !slices.Equal(seen, inA) {
		t.Fatalf("paging queue a gave %v; want %v", seen, inA)
	}
	succeeded := mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs?state=succeeded", nil, 200)
	if js := succeeded.Jobs; len(js) != 1 || js[0].ID != inA[0] {
		t.Fatalf("state=succeeded gave %v; want job %s", js, inA[0])
	}
	if status, _ := call(t, s, s.AdminToken, "GET", "/v1/jobs?state=lost", nil); status != 400 {
		t.Fatalf("unknown state filter = %d; want 400", status)
	}
}
