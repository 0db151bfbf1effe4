package jobsapi_test

import (
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

// A job goes from enqueue to an agent and back, and the store shows it.
func TestJobRoundTrip(t *testing.T) {
	s := jobsapitest.Start(t)
	must(t, s, "POST", "/v1/queues", map[string]any{"name": "q"}, 201)
	ids := mustAs[jobtype.EnqueueAnswer](t, s, "POST", "/v1/jobs", map[string]any{"jobs": []any{map[string]any{"queue": "q", "payload": []string{"a", "b"}}}}, 201).IDs
	lease := mustAs[jobtype.LeaseAnswer](t, s, "POST", "/v1/agent/lease", map[string]any{"agent": "a1", "slots": 2}, 200)
	got := lease.Jobs
	if len(got) != 1 || got[0].ID != ids[0] {
		t.Fatalf("lease = %v; want job %s", lease, ids[0])
	}
	must(t, s, "POST", "/v1/agent/complete", map[string]any{"agent": "a1", "results": []any{map[string]any{"id": ids[0], "attempt": 1, "exitCode": 0, "output": "hi"}}}, 200)
	job := mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+ids[0], nil, 200)
	if job.State != jobtype.StateSucceeded || job.Output != "hi" {
		t.Fatalf("job = %v; want succeeded with output hi", job)
	}
	if err := s.Engine.Idle(); err != nil {
		t.Fatal(err)
	}
}
