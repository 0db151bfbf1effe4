package jobsapi_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

// Per-key limits, priorities and capabilities through the API
// (docs/design.md, "Per-key limits, priorities and random picks"):
// prioritized queues of targets, capabilities, a per-network limit shared
// by all queues, batches, and agents that report back.

// An agent gets work from the highest-priority queue it serves.
func TestHigherPriorityQueueFirst(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "low", "priority": 1})
	queue(t, s, map[string]any{"name": "high", "priority": 10})
	enqueue(t, s, map[string]any{"queue": "low"}, map[string]any{"queue": "high"}, map[string]any{"queue": "low"})
	got := queues(lease(t, s, "a", nil, 3, 3))
	if !slices.Equal(got, []string{"high"}) {
		t.Fatalf("first lease took from %v; want only the high queue", got)
	}
	got = queues(lease(t, s, "a", nil, 3, 3))
	if !slices.Equal(got, []string{"low", "low"}) {
		t.Fatalf("second lease took from %v; want the low queue once high is empty", got)
	}
}

// An agent that names the queues it serves gets work only from those.
func TestAgentNamesItsQueues(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "high", "priority": 10})
	queue(t, s, map[string]any{"name": "low", "priority": 1})
	enqueue(t, s, map[string]any{"queue": "high"}, map[string]any{"queue": "low"})
	out := mustAs[jobtype.LeaseAnswer](t, s, "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 5, "queues": []string{"low"}}, 200)
	if len(out.Jobs) != 1 || out.Jobs[0].Queue != "low" {
		t.Fatalf("an agent naming low got %+v; want the low job only", out.Jobs)
	}
	status, body := call(t, s, s.AdminToken, "POST", "/v1/agent/lease", map[string]any{"agent": "b", "slots": 1, "queues": []string{"typo"}})
	if status != 400 || body["error"] != `queues[0]: unknown queue "typo"` {
		t.Fatalf("naming an unknown queue = %d %v; want 400 naming queues[0]", status, body)
	}
}

// A queue that requires capabilities is served only to agents offering them.
func TestCapabilitiesRouteJobs(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "ipv6", "priority": 10, "requires": []string{"ipv6"}})
	queue(t, s, map[string]any{"name": "any"})
	enqueue(t, s, map[string]any{"queue": "ipv6"}, map[string]any{"queue": "any"})
	if got := queues(lease(t, s, "plain", nil, 5, 5)); !slices.Equal(got, []string{"any"}) {
		t.Fatalf("an agent without ipv6 got %v; want only the any queue", got)
	}
	if got := queues(lease(t, s, "v6", []string{"ipv6", "x"}, 5, 5)); !slices.Equal(got, []string{"ipv6"}) {
		t.Fatalf("an agent with ipv6 got %v; want the ipv6 queue", got)
	}
}

// A key limit holds across queues: with net:* at 2, two agents asking for
// work from two queues of targets in one /24 get two jobs in all.
func TestKeyLimitAcrossQueues(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "a", "priority": 5})
	queue(t, s, map[string]any{"name": "b"})
	must(t, s, "PUT", "/v1/limits", map[string]any{"pattern": "net:*", "limit": 2}, 200)
	must(t, s, "POST", "/v1/queues/a/targets", "10.0.0.1\n10.0.0.2\n", 201)
	must(t, s, "POST", "/v1/queues/b/targets", "10.0.0.3\n10.0.0.4\n10.9.9.9\n", 201)
	first := lease(t, s, "x", nil, 10, 10)
	second := lease(t, s, "y", nil, 10, 10)
	var in24 int
	for _, j := range append(first, second...) {
		if j.Payload != "10.9.9.9" {
			in24++
		}
	}
	if in24 != 2 || len(first)+len(second) != 3 {
		t.Fatalf("leases gave %v and %v; want 2 jobs of 10.0.0.0/24 and the one of 10.9.9.0/24", first, second)
	}
	keys := mustAs[jobtype.Stats](t, s, "GET", "/v1/stats", nil, 200).Keys
	found := false
	for _, k := range keys {
		if k.Key == "net:10.0.0.0/24" {
			found = k.Running == 2 && k.Limit == 2 && k.Queued == 2
		}
	}
	if !found {
		t.Fatalf("stats keys = %v; want net:10.0.0.0/24 running 2 of 2 with 2 queued", keys)
	}
	complete(t, s, "x", 0, first...)
	if got := lease(t, s, "x", nil, 10, 10); len(got) != min(2, len(first)) {
		t.Fatalf("after completing %d jobs the next lease gave %d", len(first), len(got))
	}
}

// A queue's batch size caps one lease: 5 jobs go out as 2, 2, 1.
func TestBatchSequence221(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q", "batch": 2})
	for range 5 {
		enqueue(t, s, map[string]any{"queue": "q"})
	}
	var sizes []int
	for range 4 {
		sizes = append(sizes, len(lease(t, s, "a", nil, 10, 10)))
	}
	if !slices.Equal(sizes, []int{2, 2, 1, 0}) {
		t.Fatalf("lease sizes = %v; want 2 2 1 0", sizes)
	}
}

// Every target is handed out exactly once, however many agents ask.
func TestEachTargetHandedOutOnce(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "scan", "order": "random"})
	must(t, s, "PUT", "/v1/limits", map[string]any{"pattern": "net:*", "limit": 3}, 200)
	var body string
	var want []string
	for i := range 200 {
		tgt := fmt.Sprintf("10.%d.%d.%d", i%4, i%7, i)
		body += tgt + "\n\n"
		want = append(want, tgt)
	}
	must(t, s, "POST", "/v1/queues/scan/targets", body, 201)
	var seen []string
	for round := 0; len(seen) < len(want) && round < 1000; round++ {
		agent := fmt.Sprintf("agent-%d", round%3)
		got := lease(t, s, agent, nil, 4, 4)
		for _, j := range got {
			seen = append(seen, j.Payload.(string))
		}
		complete(t, s, agent, 0, got...)
	}
	sort.Strings(seen)
	sort.Strings(want)
	if !slices.Equal(seen, want) {
		t.Fatalf("handed out %d targets (%d distinct wanted); duplicates or losses", len(seen), len(want))
	}
	checkIdle(t, s)
}

// A completion reported twice, or for a job that does not exist, is
// acknowledged and ignored.
func TestIdempotentCompletion(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "q"})
	enqueue(t, s, map[string]any{"queue": "q"})
	got := lease(t, s, "a", nil, 1, 1)
	if acks := complete(t, s, "a", 0, got...); acks[0].Ignored {
		t.Fatalf("first completion ack = %v; want accepted", acks)
	}
	if acks := complete(t, s, "a", 1, got...); !acks[0].Ignored {
		t.Fatalf("repeated completion ack = %v; want ignored", acks)
	}
	if acks := complete(t, s, "a", 0, leasedJob{ID: "99999", Attempt: 1}); !acks[0].Ignored {
		t.Fatalf("unknown job ack = %v; want ignored", acks)
	}
	if st := jobState(t, s, got[0].ID); st != "succeeded" {
		t.Fatalf("job state after a repeated failing report = %s; want succeeded", st)
	}
}

// No token, or an unknown one, gets 401; a role that may not, 403.
func TestTokensAndRoles(t *testing.T) {
	s := jobsapitest.Start(t)
	agentTok := must(t, s, "POST", "/v1/tokens", map[string]any{"name": "scanner", "role": "agent"}, 201)["token"].(string)
	clientTok := must(t, s, "POST", "/v1/tokens", map[string]any{"name": "ci", "role": "client"}, 201)["token"].(string)
	queue(t, s, map[string]any{"name": "q"})
	cases := []struct {
		name, token, method, path string
		body                      any
		want                      int
	}{
		{"no token", "", "GET", "/v1/queues", nil, 401},
		{"unknown token", "usher_nope-nope-nope-nope", "GET", "/v1/queues", nil, 401},
		{"agent creates a queue", agentTok, "POST", "/v1/queues", map[string]any{"name": "x"}, 403},
		{"agent enqueues", agentTok, "POST", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q"}}}, 403},
		{"agent leases", agentTok, "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 1}, 200},
		{"client enqueues", clientTok, "POST", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q"}}}, 201},
		{"client leases", clientTok, "POST", "/v1/agent/lease", map[string]any{"agent": "a", "slots": 1}, 403},
		{"client lists tokens", clientTok, "GET", "/v1/tokens", nil, 403},
		{"client reads stats", clientTok, "GET", "/v1/stats", nil, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := call(t, s, c.token, c.method, c.path, c.body)
			if status != c.want || (status >= 400 && out["error"] == "") {
				t.Fatalf("%s %s = %d %v; want %d with an error text", c.method, c.path, status, out, c.want)
			}
		})
	}
}
