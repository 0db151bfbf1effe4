package jobsapi_test

import (
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
)

// Every malformed request gets a 4xx with a JSON error naming the field,
// and changes nothing.
func TestBadRequestsNameTheField(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	done := enqueue(t, s, map[string]any{"queue": "q"})[0]
	complete(t, s, "a", 0, lease(t, s, "a", nil, 1, 1)...)
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
		{"malformed JSON", "POST", "/v1/jobs", []byte(`{"jobs": [`), 400, "malformed JSON"},
		{"empty body", "POST", "/v1/jobs", []byte(``), 400, "empty body"},
		{"two values", "POST", "/v1/queues", []byte(`{"name":"z"} {}`), 400, "more than one"},
		{"unknown field", "POST", "/v1/jobs", map[string]any{"jobs": []any{}, "x": 1}, 400, "x: unknown field"},
		{"wrong type", "POST", "/v1/jobs", map[string]any{"jobs": "many"}, 400, "jobs"},
		{"no jobs", "POST", "/v1/jobs", map[string]any{"jobs": []any{}}, 400, "jobs: empty"},
		{"missing queue", "POST", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{}}}, 400, "jobs[0].queue: required"},
		{"unknown queue", "POST", "/v1/jobs", job(map[string]any{"queue": "nope"}), 400, `jobs[1].queue: unknown queue "nope"`},
		{"unknown tier", "POST", "/v1/jobs", job(map[string]any{"tier": "glacial"}), 400, "jobs[1].tier"},
		{"timeout too long", "POST", "/v1/jobs", job(map[string]any{"timeoutMs": 1e10}), 400, "jobs[1].timeoutMs"},
		{"bad mode", "POST", "/v1/jobs", job(map[string]any{"mode": "append"}), 400, "jobs[1].mode"},
		{"priority range", "POST", "/v1/jobs", job(map[string]any{"priority": 40000}), 400, "jobs[1].priority"},
		{"empty key", "POST", "/v1/jobs", job(map[string]any{"keys": []string{"net:a", ""}}), 400, "jobs[1].keys[1]"},
		{"unknown dependency", "POST", "/v1/jobs", job(map[string]any{"after": []string{"424242"}}), 400, "jobs[1].after[0]"},
		{"negative retries", "POST", "/v1/jobs", job(map[string]any{"retry": map[string]any{"maxAttempts": -1}}), 400, "jobs[1].retry.maxAttempts"},
		{"bad queue name", "POST", "/v1/queues", map[string]any{"name": "a/b"}, 400, "name"},
		{"bad order", "POST", "/v1/queues", map[string]any{"name": "z", "order": "lifo"}, 400, "order"},
		{"queue exists", "POST", "/v1/queues", map[string]any{"name": "q"}, 409, "exists"},
		{"no such queue", "GET", "/v1/queues/zzz", nil, 404, "zzz"},
		{"no such job", "GET", "/v1/jobs/77", nil, 404, "77"},
		{"job id not a number", "GET", "/v1/jobs/abc", nil, 404, "abc"},
		{"cancel finished job", "POST", "/v1/jobs/" + done + "/cancel", nil, 409, "succeeded"},
		{"retry succeeded job", "POST", "/v1/jobs/" + done + "/retry", nil, 409, "succeeded"},
		{"limit without pattern", "PUT", "/v1/limits", map[string]any{"limit": 3}, 400, "pattern"},
		{"lease without agent", "POST", "/v1/agent/lease", map[string]any{"slots": 1}, 400, "agent"},
		{"lease without slots", "POST", "/v1/agent/lease", map[string]any{"agent": "a"}, 400, "slots"},
		{"lease max over slots", "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 1, "max": 2}, 400, "max"},
		{"wait too long", "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 1, "waitMs": 600000}, 400, "waitMs"},
		{"renew unknown agent", "POST", "/v1/agent/renew", map[string]any{"agent": "ghost"}, 404, "ghost"},
		{"result without attempt", "POST", "/v1/agent/complete", map[string]any{"agent": "a", "results": []any{map[string]any{"id": "1"}}}, 400, "results[0]"},
		{"unknown endpoint", "GET", "/v1/nothing", nil, 404, "no endpoint"},
		{"no targets", "POST", "/v1/queues/q/targets", "\n  \n", 400, "no target"},
		{"workflow cycle", "POST", "/v1/workflows", map[string]any{"jobs": []any{
			map[string]any{"name": "a", "queue": "q", "after": []string{"b"}},
			map[string]any{"name": "b", "queue": "q", "after": []string{"a"}}}}, 400, "dependency cycle"},
		{"workflow unknown name", "POST", "/v1/workflows", map[string]any{"jobs": []any{
			map[string]any{"name": "a", "queue": "q", "after": []string{"zz"}}}}, 400, "jobs[0].after[0]"},
		{"token bad role", "POST", "/v1/tokens", map[string]any{"name": "x", "role": "root"}, 400, "role"},
	}
	before := must(t, s, "GET", "/v1/stats", nil, 200)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Raw JSON: the error body {"error": ...} is the wire shape under test.
			status, out := call(t, s, s.AdminToken, c.method, c.path, c.body)
			msg, _ := out["error"].(string)
			if status != c.status || !strings.Contains(msg, c.mention) {
				t.Fatalf("%s %s = %d %q; want %d mentioning %q", c.method, c.path, status, msg, c.status, c.mention)
			}
		})
	}
	after := must(t, s, "GET", "/v1/stats", nil, 200)
	if q1, q2 := before["queues"], after["queues"]; !equalJSON(q1, q2) {
		t.Fatalf("bad requests changed the queues: %v → %v", q1, q2)
	}
}

// A body over the limit is refused with 413.
func TestOversizedBodyIsRefused(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	big := `{"jobs":[{"queue":"q","payload":"` + strings.Repeat("x", 33<<20) + `"}]}`
	status, out := call(t, s, s.AdminToken, "POST", "/v1/jobs", []byte(big))
	if status != 413 || !strings.Contains(out["error"].(string), "limit") {
		t.Fatalf("oversized body = %d %v; want 413", status, out)
	}
	status, out = call(t, s, s.AdminToken, "POST", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q", "payload": strings.Repeat("y", 2<<20)}}})
	if status != 400 || !strings.Contains(out["error"].(string), "jobs[0].payload") {
		t.Fatalf("oversized payload = %d %v; want 400 naming jobs[0].payload", status, out)
	}
}

func equalJSON(a, b any) bool {
	return strings.EqualFold(strings.TrimSpace(toJSON(a)), strings.TrimSpace(toJSON(b)))
}
