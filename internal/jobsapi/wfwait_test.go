package jobsapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/usherhq/usher/internal/jobsapi/jobsapitest"
	"github.com/usherhq/usher/internal/testwait"
	"github.com/usherhq/usher/jobtype"
)

// waitAnswer is the outcome of a GET /v1/workflows/{id}?wait= made in the
// background.
type waitAnswer struct {
	status int
	wf     jobtype.Workflow
	err    error
}

// waitInBackground long-polls a workflow and delivers the answer.
func waitInBackground(s *jobsapitest.Server, id, wait string) <-chan waitAnswer {
	ch := make(chan waitAnswer, 1)
	go func() {
		req, _ := http.NewRequest("GET", s.URL+"/v1/workflows/"+id+"?wait="+wait, nil)
		req.Header.Set("Authorization", "Bearer "+s.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- waitAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var a waitAnswer
		a.status = resp.StatusCode
		a.err = json.Unmarshal(data, &a.wf)
		ch <- a
	}()
	return ch
}

// Workflow completion (docs/api.md, "Workflows"): GET ?wait= answers when
// the workflow's last job finishes, with its final state and every job
// final, not before — however many jobs finish on the way.
func TestWorkflowWaitAnswersWhenTheLastJobFinishes(t *testing.T) {
	for _, c := range []struct {
		name      string
		exit      int
		wantState string
	}{
		{"succeeded", 0, "succeeded"},
		{"failed", 3, "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := jobsapitest.Start(t)
			queue(t, s, map[string]any{"name": "etl"})
			wf := mustAs[jobtype.SubmittedWorkflow](t, s, "POST", "/v1/workflows", map[string]any{"jobs": []any{
				map[string]any{"name": "a", "queue": "etl"},
				map[string]any{"name": "b", "queue": "etl", "after": []string{"a"}},
			}}, 201)
			got := waitInBackground(s, wf.ID, "30s")
			first := lease(t, s, "w", nil, 1, 1)
			complete(t, s, "w", 0, first...)
			second := lease(t, s, "w", nil, 1, 1)
			if len(first) != 1 || len(second) != 1 {
				t.Fatalf("leased %v then %v; want a then b", first, second)
			}
			select {
			case a := <-got:
				t.Fatalf("the wait answered %v while b still runs", a)
			default:
			}
			complete(t, s, "w", c.exit, second...)
			a := testwait.Receive(t, 10*time.Second, got, "the wait's answer")
			if a.err != nil || a.status != 200 || a.wf.State != c.wantState || len(a.wf.Jobs) != 2 {
				t.Fatalf("wait answered %d %+v (%v); want 200 and %s with its two jobs", a.status, a.wf, a.err, c.wantState)
			}
			for _, j := range a.wf.Jobs {
				if !j.State.Final() {
					t.Fatalf("job %s is %s in the final answer", j.ID, j.State)
				}
			}
			checkIdle(t, s)
		})
	}
}

// A wait that ends first answers 200 with the workflow as it is; a
// finished workflow answers at once; bad waits are refused.
func TestWorkflowWaitTimeoutAndBadInput(t *testing.T) {
	s := jobsapitest.Start(t)
	queue(t, s, map[string]any{"name": "etl"})
	wf := mustAs[jobtype.SubmittedWorkflow](t, s, "POST", "/v1/workflows", map[string]any{"jobs": []any{
		map[string]any{"name": "a", "queue": "etl"},
	}}, 201)
	if got := mustAs[jobtype.Workflow](t, s, "GET", "/v1/workflows/"+wf.ID+"?wait=20ms", nil, 200); got.State != "running" {
		t.Fatalf("after a wait that ran out: %s; want running", got.State)
	}
	for _, bad := range []string{"abc", "-1s", "10"} {
		status, body := call(t, s, s.AdminToken, "GET", "/v1/workflows/"+wf.ID+"?wait="+bad, nil)
		if msg := fmt.Sprint(body["error"]); status != 400 || !strings.Contains(msg, "wait") {
			t.Errorf("wait=%s: %d %v; want 400 naming wait", bad, status, body)
		}
	}
	if status, _ := call(t, s, s.AdminToken, "GET", "/v1/workflows/999?wait=30s", nil); status != 404 {
		t.Errorf("unknown workflow: %d; want 404", status)
	}
	complete(t, s, "w", 0, lease(t, s, "w", nil, 1, 1)...)
	got := testwait.Receive(t, 10*time.Second, waitInBackground(s, wf.ID, "1h"), "the answer for a finished workflow")
	if got.status != 200 || got.wf.State != "succeeded" {
		t.Fatalf("finished workflow: %d %+v; want 200 succeeded", got.status, got.wf)
	}
}
