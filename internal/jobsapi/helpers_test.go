package jobsapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/jobtype"
)

// call sends a request with a JSON (or, for a string, plain) body and
// returns the status and the answer as raw JSON: for the tests that check
// the wire's shape (error bodies, field names), not the typed content.
func call(t *testing.T, s *jobsapitest.Server, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	status, data := send(t, s, token, method, path, body)
	var out map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, data)
		}
	}
	return status, out
}

// send sends a request with a JSON (or, for a string, plain) body and
// returns the status and the answer's bytes.
func send(t *testing.T, s *jobsapitest.Server, token, method, path string, body any) (int, []byte) {
	t.Helper()
	return sendHeader(t, s, token, method, path, body, nil)
}

// sendHeader is send with extra request headers.
func sendHeader(t *testing.T, s *jobsapitest.Server, token, method, path string, body any, hdr http.Header) (int, []byte) {
	t.Helper()
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd, ctype = strings.NewReader(b), "text/plain"
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", ctype)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// mustAs sends a request as the admin, fails the test unless the status is
// want, and decodes the answer into T, a wire type of package jobtype.
func mustAs[T any](t *testing.T, s *jobsapitest.Server, method, path string, body any, want int) T {
	t.Helper()
	status, data := send(t, s, s.AdminToken, method, path, body)
	if status != want {
		t.Fatalf("%s %s = %d %s; want %d", method, path, status, data, want)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: answer %q does not decode into %T: %v", method, path, data, out, err)
	}
	return out
}

// must is call that fails the test unless the status is want.
func must(t *testing.T, s *jobsapitest.Server, method, path string, body any, want int) map[string]any {
	t.Helper()
	status, out := call(t, s, s.AdminToken, method, path, body)
	if status != want {
		t.Fatalf("%s %s = %d %v; want %d", method, path, status, out, want)
	}
	return out
}

// leasedJob is a job as the lease answer gives it.
type leasedJob struct {
	ID      string
	Queue   string
	Attempt int
	Payload any
}

// lease asks for work as agent (no waiting) and returns the jobs.
func lease(t *testing.T, s *jobsapitest.Server, agent string, caps []string, slots, max int) []leasedJob {
	t.Helper()
	return leaseWait(t, s, agent, caps, slots, max, 0)
}

func leaseWait(t *testing.T, s *jobsapitest.Server, agent string, caps []string, slots, max int, waitMs int) []leasedJob {
	t.Helper()
	if caps == nil {
		caps = []string{}
	}
	out := mustAs[jobtype.LeaseAnswer](t, s, "POST", "/v1/agent/lease", map[string]any{"agent": agent, "capabilities": caps, "slots": slots, "max": max, "waitMs": waitMs}, 200)
	var got []leasedJob
	for _, j := range out.Jobs {
		var payload any
		if len(j.Payload) > 0 {
			if err := json.Unmarshal(j.Payload, &payload); err != nil {
				t.Fatalf("job %s: payload %s: %v", j.ID, j.Payload, err)
			}
		}
		got = append(got, leasedJob{ID: j.ID, Queue: j.Queue, Attempt: j.Attempt, Payload: payload})
	}
	return got
}

// complete reports attempts with the given exit code and returns the acks.
func complete(t *testing.T, s *jobsapitest.Server, agent string, exit int, jobs ...leasedJob) []jobtype.Ack {
	t.Helper()
	results := make([]map[string]any, len(jobs))
	for i, j := range jobs {
		results[i] = map[string]any{"id": j.ID, "attempt": j.Attempt, "exitCode": exit}
	}
	return mustAs[jobtype.CompleteAnswer](t, s, "POST", "/v1/agent/complete", map[string]any{"agent": agent, "results": results}, 200).Acks
}

// enqueue submits jobs and returns their ids.
func enqueue(t *testing.T, s *jobsapitest.Server, jobs ...map[string]any) []string {
	t.Helper()
	return mustAs[jobtype.EnqueueAnswer](t, s, "POST", "/v1/jobs", map[string]any{"jobs": jobs}, 201).IDs
}

// queue creates a queue from fields.
func queue(t *testing.T, s *jobsapitest.Server, fields map[string]any) {
	t.Helper()
	must(t, s, "POST", "/v1/queues", fields, 201)
}

// jobState reads a job's state.
func jobState(t *testing.T, s *jobsapitest.Server, id string) string {
	t.Helper()
	return string(mustAs[jobtype.Job](t, s, "GET", "/v1/jobs/"+id, nil, 200).State)
}

func queues(js []leasedJob) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.Queue
	}
	return out
}

func checkIdle(t *testing.T, s *jobsapitest.Server) {
	t.Helper()
	if err := s.Engine.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := s.Engine.Idle(); err != nil {
		t.Fatal(err)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
