package jobsapi_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/jobtype"
)

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Bad runAt, delayMs and deadline values get a 400 naming the field, and
// change nothing; run-now on a job that is not waiting for its time is a
// conflict.
func TestScheduleBadInputNamesTheField(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	queued := enqueue(t, s, map[string]any{"queue": "q"})[0]
	done := enqueue(t, s, map[string]any{"queue": "q"})[0]
	must(t, s, "POST", "/v1/jobs/"+done+"/cancel", nil, 200)
	now := time.Now()
	beyond := now.Add(jobs.ScheduleHorizon + time.Hour)
	job := func(extra map[string]any) map[string]any {
		j := map[string]any{"queue": "q"}
		for k, v := range extra {
			j[k] = v
		}
		return map[string]any{"jobs": []any{map[string]any{"queue": "q"}, j}}
	}
	cases := []struct {
		name, method, path string
		body               any
		status             int
		mention            string
	}{
		{"runAt not a time", "POST", "/v1/jobs", job(map[string]any{"runAt": "tomorrow"}), 400, "jobs[1].runAt: not an RFC 3339 time"},
		{"runAt a number", "POST", "/v1/jobs", job(map[string]any{"runAt": 1700000000}), 400, "jobs[1].runAt"},
		{"runAt without zone", "POST", "/v1/jobs", job(map[string]any{"runAt": "2030-01-02T03:04:05"}), 400, "jobs[1].runAt"},
		{"runAt beyond the horizon", "POST", "/v1/jobs", job(map[string]any{"runAt": rfc(beyond)}), 400, "jobs[1].runAt: " + rfc(beyond)[:10]},
		{"delayMs negative", "POST", "/v1/jobs", job(map[string]any{"delayMs": -1}), 400, "jobs[1].delayMs: -1 is negative"},
		{"delayMs not an integer", "POST", "/v1/jobs", job(map[string]any{"delayMs": 1.5}), 400, "delayMs"},
		{"delayMs beyond the horizon", "POST", "/v1/jobs", job(map[string]any{"delayMs": jobs.ScheduleHorizon.Milliseconds() + 1}), 400, "jobs[1].delayMs"},
		{"runAt and delayMs", "POST", "/v1/jobs", job(map[string]any{"delayMs": 5, "runAt": rfc(now.Add(time.Hour))}), 400, "jobs[1].delayMs: give runAt or delayMs, not both"},
		{"deadline not a time", "POST", "/v1/jobs", job(map[string]any{"deadline": "soon"}), 400, "jobs[1].deadline"},
		{"deadline passed", "POST", "/v1/jobs", job(map[string]any{"deadline": rfc(now.Add(-time.Second))}), 400, "jobs[1].deadline"},
		{"deadline before runAt", "POST", "/v1/jobs", job(map[string]any{"runAt": rfc(now.Add(2 * time.Hour)), "deadline": rfc(now.Add(time.Hour))}), 400, "jobs[1].deadline"},
		{"deadline before delay", "POST", "/v1/jobs", job(map[string]any{"delayMs": 7200000, "deadline": rfc(now.Add(time.Hour))}), 400, "jobs[1].deadline"},
		{"deadline beyond the horizon", "POST", "/v1/jobs", job(map[string]any{"deadline": rfc(beyond)}), 400, "jobs[1].deadline"},
		{"workflow runAt", "POST", "/v1/workflows", map[string]any{"jobs": []any{
			map[string]any{"name": "a", "queue": "q"}, map[string]any{"name": "b", "queue": "q", "runAt": "x"}}}, 400, "jobs[1].runAt"},
		{"workflow delayMs", "POST", "/v1/workflows", map[string]any{"jobs": []any{
			map[string]any{"name": "a", "queue": "q", "delayMs": -5}}}, 400, "jobs[0].delayMs"},
		{"run a queued job", "POST", "/v1/jobs/" + queued + "/run", nil, 409, "queued"},
		{"run a cancelled job", "POST", "/v1/jobs/" + done + "/run", nil, 409, "cancelled"},
		{"run an unknown job", "POST", "/v1/jobs/424242/run", nil, 404, "424242"},
	}
	before := must(t, s, "GET", "/v1/jobs", nil, 200)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := call(t, s, s.AdminToken, c.method, c.path, c.body)
			msg, _ := out["error"].(string)
			if status != c.status || !strings.Contains(msg, c.mention) {
				t.Fatalf("%s %s = %d %q; want %d mentioning %q", c.method, c.path, status, msg, c.status, c.mention)
			}
		})
	}
	if after := must(t, s, "GET", "/v1/jobs", nil, 200); !equalJSON(before, after) {
		t.Fatalf("bad requests changed the jobs: %v → %v", before, after)
	}
}

// A scheduled job is listed as scheduled, is not leased before its time,
// runs at once when asked to, and can be cancelled; delayMs is shown as
// the runAt it resolves to.
func TestScheduledJobLifecycle(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	start := time.Now()
	runAt := start.Add(time.Hour).Truncate(time.Millisecond)
	ids := enqueue(t, s, map[string]any{"queue": "q", "runAt": rfc(runAt)},
		map[string]any{"queue": "q", "delayMs": 3600000, "deadline": rfc(runAt.Add(time.Hour))},
		map[string]any{"queue": "q"})
	j := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+ids[1], nil, 200)
	if j.State != jobtype.StateScheduled || j.DelayMs != 0 || j.RunAt == nil ||
		j.RunAt.Before(start.Add(time.Hour)) || j.RunAt.After(time.Now().Add(time.Hour)) || j.Deadline == nil {
		t.Fatalf("job with delayMs: %+v; want scheduled with runAt an hour after submission", j)
	}
	page := mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs?state=scheduled", nil, 200)
	var listed []string
	for _, j := range page.Jobs {
		listed = append(listed, j.ID)
	}
	if !slices.Equal(listed, ids[:2]) {
		t.Fatalf("state=scheduled lists %v; want %v", listed, ids[:2])
	}
	if got := lease(t, s, "a", nil, 4, 4); len(got) != 1 || got[0].ID != ids[2] {
		t.Fatalf("lease = %v; want only the unscheduled job", got)
	}
	if j := mustAs[jobtype.Job](t, s, "POST", "/v1/jobs/"+ids[0]+"/run", nil, 200); j.State != jobtype.StateQueued {
		t.Fatalf("after run: %s; want queued", j.State)
	}
	if got := lease(t, s, "a", nil, 4, 4); len(got) != 1 || got[0].ID != ids[0] {
		t.Fatalf("lease after run = %v; want %s", got, ids[0])
	}
	if j := mustAs[jobtype.Job](t, s, "POST", "/v1/jobs/"+ids[1]+"/cancel", nil, 200); j.State != jobtype.StateCancelled {
		t.Fatalf("cancel of a scheduled job: %s", j.State)
	}
	complete(t, s, "a", 0, lease(t, s, "a", nil, 4, 0)...)
}

// A job with a near deadline in a paused queue is discarded when it comes,
// by the engine's clock loop (no request wakes it), with the error.
func TestDeadlineDiscardsUnstartedJob(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "p", "active": false})
	id := enqueue(t, s, map[string]any{"queue": "p", "deadline": rfc(time.Now().Add(200 * time.Millisecond))})[0]
	var j jobtype.Job
	testwait.Eventually(t, 5*time.Second, func() bool {
		j = mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+id, nil, 200)
		return j.State.Final()
	}, "job %s not discarded at its deadline", id)
	if j.State != jobtype.StateCancelled || j.Error != jobs.DeadlinePassed {
		t.Fatalf("after its deadline: %s %q; want cancelled with %q", j.State, j.Error, jobs.DeadlinePassed)
	}
	checkIdle(t, s)
}
