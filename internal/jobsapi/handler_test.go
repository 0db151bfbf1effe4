package jobsapi_test

import (
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

// A handler's snooze, progress, result and cancel over /v1, as the wire
// shows them.
func TestHandlerReportsOverTheAPI(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q", "retry": map[string]any{"maxAttempts": 1}})
	id := enqueue(t, s, map[string]any{"queue": "q"})[0]
	lease(t, s, "a", nil, 1, 1)
	acks := mustAs[jobtype.CompleteAnswer](t, s, "POST", "/v1/agent/complete", map[string]any{"agent": "a",
		"results": []any{map[string]any{"id": id, "attempt": 1, "exitCode": 0, "snoozeMs": 0}}}, 200).Acks
	if acks[0].Snoozed || acks[0].Ignored {
		t.Fatalf("snoozeMs 0 = %+v, want a plain success", acks)
	}

	id = enqueue(t, s, map[string]any{"queue": "q"})[0]
	got := lease(t, s, "a", nil, 1, 1)
	out := must(t, s, "POST", "/v1/agent/progress", map[string]any{"agent": "a", "id": id, "attempt": 1, "value": 0.3, "message": "step 3 of 10"}, 200)
	if out["ignored"] != false {
		t.Fatalf("progress = %v, want not ignored", out)
	}
	job := must(t, s, "GET", "/v1/jobs/"+id, nil, 200)
	if p, _ := job["progress"].(map[string]any); p["value"] != 0.3 || p["message"] != "step 3 of 10" {
		t.Fatalf("GET job progress = %v, want {value 0.3, message step 3 of 10}", job["progress"])
	}
	acks = mustAs[jobtype.CompleteAnswer](t, s, "POST", "/v1/agent/complete", map[string]any{"agent": "a",
		"results": []any{map[string]any{"id": id, "attempt": got[0].Attempt, "exitCode": 0, "snoozeMs": 1}}}, 200).Acks
	if !acks[0].Snoozed {
		t.Fatalf("snooze ack = %+v", acks)
	}
	var again []leasedJob
	for len(again) == 0 {
		again = leaseWait(t, s, "a", nil, 1, 1, 1000)
	}
	if again[0].ID != id || again[0].Attempt != 1 {
		t.Fatalf("after a snooze leased %+v; want job %s, attempt 1 again", again, id)
	}
	must(t, s, "POST", "/v1/agent/complete", map[string]any{"agent": "a",
		"results": []any{map[string]any{"id": id, "attempt": 1, "exitCode": 0, "result": map[string]any{"rows": 12}}}}, 200)
	job = must(t, s, "GET", "/v1/jobs/"+id, nil, 200)
	if r, _ := job["result"].(map[string]any); job["state"] != "succeeded" || r["rows"] != 12.0 {
		t.Fatalf("GET job = state %v result %v; want succeeded with {rows: 12}", job["state"], job["result"])
	}

	queue(t, s, map[string]any{"name": "r", "retry": map[string]any{"maxAttempts": 5}})
	id = enqueue(t, s, map[string]any{"queue": "r"})[0]
	lease(t, s, "a", nil, 1, 1)
	acks = mustAs[jobtype.CompleteAnswer](t, s, "POST", "/v1/agent/complete", map[string]any{"agent": "a",
		"results": []any{map[string]any{"id": id, "attempt": 1, "exitCode": 2, "error": "the input is malformed", "cancel": true}}}, 200).Acks
	if acks[0].Retrying {
		t.Fatalf("cancel ack = %+v, want no retry", acks)
	}
	job = must(t, s, "GET", "/v1/jobs/"+id, nil, 200)
	if job["state"] != "failed" || job["error"] != "the input is malformed" {
		t.Fatalf("cancelled job = %v %v; want failed with its handler's error", job["state"], job["error"])
	}
	checkIdle(t, s)
}

// Backoffs on the wire: the older backoffMs form shows as an exponential
// backoff; a job's own backoff is kept as given.
func TestBackoffOnTheWire(t *testing.T) {
	s := jobsapitest.Start(t)
	q := mustAs[jobtype.Queue](t, s, "POST", "/v1/queues", map[string]any{"name": "old", "retry": map[string]any{"maxAttempts": 3, "backoffMs": 1000, "maxBackoffMs": 8000}}, 201)
	if b := q.Retry.Backoff; b == nil || *b != (jobtype.Backoff{Policy: "exponential", BaseMs: 1000, MaxMs: 8000}) || q.Retry.BackoffMs != 1000 {
		t.Fatalf("queue retry = %+v (backoff %+v); want exponential 1000..8000", q.Retry, b)
	}
	q = mustAs[jobtype.Queue](t, s, "POST", "/v1/queues", map[string]any{"name": "lin", "retry": map[string]any{"maxAttempts": 3, "backoff": map[string]any{"policy": "linear", "baseMs": 500}}}, 201)
	if b := q.Retry.Backoff; b == nil || b.Policy != "linear" || q.Retry.BackoffMs != 0 {
		t.Fatalf("linear queue retry = %+v; want linear, no backoffMs", q.Retry)
	}
	id := enqueue(t, s, map[string]any{"queue": "old", "backoff": map[string]any{"policy": "constant", "baseMs": 250, "maxMs": 250}})[0]
	j := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+id, nil, 200)
	if j.Backoff == nil || *j.Backoff != (jobtype.Backoff{Policy: "constant", BaseMs: 250, MaxMs: 250}) || j.MaxAttempts != 3 {
		t.Fatalf("job backoff %+v, max attempts %d; want constant 250, the queue's 3 attempts", j.Backoff, j.MaxAttempts)
	}
}

// Bad reports and backoffs get 400 naming the field and change nothing.
func TestBadHandlerReportsNameTheField(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	id := enqueue(t, s, map[string]any{"queue": "q"})[0]
	lease(t, s, "a", nil, 1, 1)
	result := func(extra map[string]any) map[string]any {
		r := map[string]any{"id": id, "attempt": 1, "exitCode": 0}
		for k, v := range extra {
			r[k] = v
		}
		return map[string]any{"agent": "a", "results": []any{r}}
	}
	progress := func(value any, msg string) map[string]any {
		return map[string]any{"agent": "a", "id": id, "attempt": 1, "value": value, "message": msg}
	}
	big := map[string]any{"blob": strings.Repeat("x", 64<<10)}
	cases := []struct {
		name, path string
		body       any
		mention    string
	}{
		{"negative snooze", "/v1/agent/complete", result(map[string]any{"snoozeMs": -5}), "results[0].snoozeMs"},
		{"snooze too long", "/v1/agent/complete", result(map[string]any{"snoozeMs": 1e12}), "results[0].snoozeMs"},
		{"snooze and cancel", "/v1/agent/complete", result(map[string]any{"snoozeMs": 5, "cancel": true}), "results[0].cancel"},
		{"result too big", "/v1/agent/complete", result(map[string]any{"result": big}), "results[0].result: 65547 bytes, over the limit of 65536"},
		{"progress message too long", "/v1/agent/progress", progress(0.5, strings.Repeat("m", 257)), "message: 257 bytes, over the limit of 256"},
		{"progress above 1", "/v1/agent/progress", progress(1.5, ""), "value"},
		{"progress below 0", "/v1/agent/progress", progress(-0.1, ""), "value"},
		{"progress without id", "/v1/agent/progress", map[string]any{"agent": "a", "attempt": 1}, "id"},
		{"progress without agent", "/v1/agent/progress", map[string]any{"id": id, "attempt": 1}, "agent"},
		{"unknown job backoff policy", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q", "backoff": map[string]any{"policy": "fibonacci", "baseMs": 1}}}}, `jobs[0].backoff.policy: "fibonacci" is not exponential, linear or constant`},
		{"job backoff max below base", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q", "backoff": map[string]any{"baseMs": 100, "maxMs": 10}}}}, "jobs[0].backoff.maxMs: 10 is below baseMs (100)"},
		{"negative base", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q", "backoff": map[string]any{"baseMs": -1}}}}, "jobs[0].backoff.baseMs"},
		{"queue backoff unknown policy", "/v1/queues", map[string]any{"name": "z", "retry": map[string]any{"backoff": map[string]any{"policy": "random", "baseMs": 1}}}, "retry.backoff.policy"},
		{"queue backoff max below base", "/v1/queues", map[string]any{"name": "z", "retry": map[string]any{"backoff": map[string]any{"baseMs": 100, "maxMs": 10}}}, "retry.backoff.maxMs"},
		{"job retry backoff max below base", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q", "retry": map[string]any{"maxAttempts": 2, "backoff": map[string]any{"policy": "linear", "baseMs": 100, "maxMs": 10}}}}}, "jobs[0].retry.backoff.maxMs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := call(t, s, s.AdminToken, "POST", c.path, c.body)
			msg, _ := out["error"].(string)
			if status != 400 || !strings.Contains(msg, c.mention) {
				t.Fatalf("POST %s = %d %q; want 400 mentioning %q", c.path, status, msg, c.mention)
			}
		})
	}
	j := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+id, nil, 200)
	if j.State != jobtype.StateRunning || j.Progress != nil || j.Result != nil {
		t.Fatalf("after the bad requests the job is %s with progress %+v, result %s; want running, neither", j.State, j.Progress, j.Result)
	}
	must(t, s, "GET", "/v1/queues/z", nil, 404)
	if page := mustAs[jobtype.JobPage](t, s, "GET", "/v1/jobs", nil, 200); len(page.Jobs) != 1 {
		t.Fatalf("the bad submissions made jobs: %d, want 1", len(page.Jobs))
	}
}
