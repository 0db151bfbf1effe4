package jobsapi_test

import (
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

// Strict start (docs/api.md, "Queues"): a strict-start queue hands out one
// job at a time, marked confirmStart; the next goes out once the holder
// posts /v1/agent/started for it (or its attempt ends). A confirmation from
// an agent that does not hold the attempt is ignored and opens nothing.
func TestStrictStartHandsOutTheNextJobAfterTheConfirmation(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "deploy", "order": "strict", "strictStart": true})
	if q := mustAs[jobtype.Queue](t, s, "GET", "/v1/queues/deploy", nil, 200); !q.StrictStart {
		t.Fatalf("queue %+v; want strictStart", q)
	}
	ids := enqueue(t, s, map[string]any{"queue": "deploy"}, map[string]any{"queue": "deploy"}, map[string]any{"queue": "deploy"})
	first := mustAs[jobtype.LeaseAnswer](t, s, "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 5}, 200).Jobs
	if len(first) != 1 || first[0].ID != ids[0] || !first[0].ConfirmStart {
		t.Fatalf("first lease %+v; want job %s alone, to confirm", first, ids[0])
	}
	if got := lease(t, s, "b", nil, 5, 5); len(got) != 0 {
		t.Fatalf("b leased %v before the first job's start was confirmed", got)
	}
	started := func(agent, id string, attempt int) bool {
		return mustAs[jobtype.StartedAnswer](t, s, "POST", "/v1/agent/started",
			map[string]any{"agent": agent, "id": id, "attempt": attempt}, 200).Ignored
	}
	if !started("b", ids[0], 1) || !started("a", ids[0], 2) || !started("a", ids[1], 1) {
		t.Fatal("a confirmation for an attempt the agent does not hold was not ignored")
	}
	if got := lease(t, s, "b", nil, 5, 5); len(got) != 0 {
		t.Fatalf("b leased %v after ignored confirmations", got)
	}
	if started("a", ids[0], 1) {
		t.Fatal("the holder's confirmation was ignored")
	}
	second := lease(t, s, "b", nil, 5, 5)
	if len(second) != 1 || second[0].ID != ids[1] {
		t.Fatalf("after the confirmation b leased %v; want job %s", second, ids[1])
	}
	complete(t, s, "b", 0, second...) // an end opens the gate too
	if third := lease(t, s, "a", nil, 5, 5); len(third) != 1 || third[0].ID != ids[2] {
		t.Fatalf("after the second job ended a leased %v; want job %s", third, ids[2])
	}
	for _, bad := range []map[string]any{{"agent": "", "id": "1", "attempt": 1}, {"agent": "a", "id": "", "attempt": 1}, {"agent": "a", "id": "1", "attempt": 0}} {
		if status, _ := call(t, s, s.AdminToken, "POST", "/v1/agent/started", bad); status != 400 {
			t.Errorf("started %v: %d; want 400", bad, status)
		}
	}
}

// strictStart needs a strict queue, at creation and on every change.
func TestStrictStartNeedsAStrictQueue(t *testing.T) {
	s := jobsapitest.Start(t)
	status, body := call(t, s, s.AdminToken, "POST", "/v1/queues", map[string]any{"name": "q", "strictStart": true})
	if status != 400 || !contains(body["error"], "strictStart") {
		t.Fatalf("fifo queue with strictStart: %d %v; want 400 naming strictStart", status, body)
	}
	queue(t, s, map[string]any{"name": "q", "order": "strict", "strictStart": true})
	if status, body := call(t, s, s.AdminToken, "PATCH", "/v1/queues/q", map[string]any{"order": "random"}); status != 400 || !contains(body["error"], "strictStart") {
		t.Fatalf("strict-start queue turned random: %d %v; want 400 naming strictStart", status, body)
	}
	q := mustAs[jobtype.Queue](t, s, "PATCH", "/v1/queues/q", map[string]any{"order": "fifo", "strictStart": false}, 200)
	if q.StrictStart || q.Order != "fifo" {
		t.Fatalf("queue %+v; want fifo without strictStart", q)
	}
}

func contains(v any, part string) bool {
	s, ok := v.(string)
	return ok && strings.Contains(s, part)
}
