package client

import (
	"context"
	"io"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/usherhq/usher/internal/telemetry"
	"github.com/usherhq/usher/jobtype"
)

// esc escapes one path segment (a queue name, job or token id).
func esc(s string) string { return url.PathEscape(s) }

// CreateQueue creates a queue (admin); a queue of that name that exists
// already is a 409.
func (c *Client) CreateQueue(ctx context.Context, q QueueSpec) (Queue, error) {
	var out Queue
	err := c.call(ctx, http.MethodPost, "/v1/queues", q, &out)
	return out, err
}

// UpdateQueue changes the fields of a queue that u sets (admin) and
// returns the queue.
func (c *Client) UpdateQueue(ctx context.Context, name string, u QueueUpdate) (Queue, error) {
	var out Queue
	err := c.call(ctx, http.MethodPatch, "/v1/queues/"+esc(name), u, &out)
	return out, err
}

// Queue returns one queue.
func (c *Client) Queue(ctx context.Context, name string) (Queue, error) {
	var out Queue
	err := c.call(ctx, http.MethodGet, "/v1/queues/"+esc(name), nil, &out)
	return out, err
}

// Queues returns every queue, sorted by name.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	var out jobtype.QueueList
	err := c.call(ctx, http.MethodGet, "/v1/queues", nil, &out)
	return out.Queues, err
}

// DeleteQueue deletes a queue and cancels its queued jobs (admin); a queue
// with running jobs is a 409.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/v1/queues/"+esc(name), nil, nil)
}

// FlushQueue cancels a queue's queued jobs (admin) and returns how many; a
// queue with running jobs is a 409.
func (c *Client) FlushQueue(ctx context.Context, name string) (int, error) {
	var out jobtype.FlushAnswer
	err := c.call(ctx, http.MethodPost, "/v1/queues/"+esc(name)+"/flush", nil, &out)
	return out.Cancelled, err
}

// SetKeyLimit sets the limit of a key or key pattern (admin); limit 0
// removes it.
func (c *Client) SetKeyLimit(ctx context.Context, pattern string, limit int) (KeyLimit, error) {
	var out KeyLimit
	err := c.call(ctx, http.MethodPut, "/v1/limits", KeyLimit{Pattern: pattern, Limit: limit}, &out)
	return out, err
}

// PutKeyLimit sets every setting of a key or key pattern at once (admin):
// its concurrency limit, its rate ("100/s", "6000/m", "10/h") and burst
// (0: the starts the rate allows in a second, at least 1). It replaces what the pattern had; limit 0 and no rate remove it.
// The answer is the limit as the server keeps it.
func (c *Client) PutKeyLimit(ctx context.Context, l KeyLimit) (KeyLimit, error) {
	var out KeyLimit
	err := c.call(ctx, http.MethodPut, "/v1/limits", l, &out)
	return out, err
}

// KeyLimits returns every key limit, sorted by pattern.
func (c *Client) KeyLimits(ctx context.Context) ([]KeyLimit, error) {
	var out jobtype.KeyLimitList
	err := c.call(ctx, http.MethodGet, "/v1/limits", nil, &out)
	return out.Limits, err
}

// Enqueue submits jobs, all or none, and returns their ids in the given
// order. It retries as EnqueueAnswer does.
func (c *Client) Enqueue(ctx context.Context, jobs ...JobSpec) ([]string, error) {
	ans, err := c.EnqueueAnswer(ctx, jobs...)
	return ans.IDs, err
}

// EnqueueTargets submits one job per line of targets to queue
// (docs/design.md, "Per-key limits, priorities and random picks"):
// blank lines are ignored, each job's payload is its line as a JSON string
// and its key is derived from the target (net:a.b.c.0/24 for an IPv4
// address). It returns the jobs' ids in line order.
func (c *Client) EnqueueTargets(ctx context.Context, queue string, targets io.Reader) ([]string, error) {
	var out jobtype.EnqueueAnswer
	err := c.send(ctx, http.MethodPost, "/v1/queues/"+esc(queue)+"/targets", "text/plain; charset=utf-8", targets, &out)
	return out.IDs, err
}

// SubmitWorkflow submits a workflow atomically; a dependency cycle is a 400
// whose *Error lists the cycle. Its jobs without a Traceparent get the one
// of ctx's span, as Enqueue's do.
func (c *Client) SubmitWorkflow(ctx context.Context, wf WorkflowSpec) (SubmittedWorkflow, error) {
	if tp := telemetry.Traceparent(ctx); tp != "" {
		wf.Jobs = slices.Clone(wf.Jobs)
		for i := range wf.Jobs {
			if wf.Jobs[i].Traceparent == "" {
				wf.Jobs[i].Traceparent = tp
			}
		}
	}
	var out SubmittedWorkflow
	err := c.call(ctx, http.MethodPost, "/v1/workflows", wf, &out)
	return out, err
}

// Workflow returns a workflow with its jobs.
func (c *Client) Workflow(ctx context.Context, id string) (Workflow, error) {
	var out Workflow
	err := c.call(ctx, http.MethodGet, "/v1/workflows/"+esc(id), nil, &out)
	return out, err
}

// workflowWaitStep is how long one request of WaitWorkflow waits: the
// server's cap.
const workflowWaitStep = 60 * time.Second

// WaitWorkflow returns a workflow once it has finished (State "succeeded"
// or "failed"), long-polling the server one minute at a time; it gives up
// with ctx's error, and then returns the workflow as last seen.
func (c *Client) WaitWorkflow(ctx context.Context, id string) (Workflow, error) {
	var last Workflow
	for {
		var out Workflow
		path := "/v1/workflows/" + esc(id) + "?wait=" + workflowWaitStep.String()
		began := time.Now()
		if err := c.call(ctx, http.MethodGet, path, nil, &out); err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, err
		}
		last = out
		if out.State != "running" {
			return out, nil
		}
		// A server shutting down answers at once: do not spin.
		if early := time.Second - time.Since(began); early > 0 && !sleep(ctx, early) {
			return last, ctx.Err()
		}
	}
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	var out Job
	err := c.call(ctx, http.MethodGet, "/v1/jobs/"+esc(id), nil, &out)
	return out, err
}

// Jobs returns one page of the jobs that f selects, in id order (newest
// first with f.Desc). A page may hold fewer than f.Limit jobs and still
// have a Next: the server examines a bounded number of jobs per page.
func (c *Client) Jobs(ctx context.Context, f JobFilter) (JobPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"queue": f.Queue, "state": string(f.State), "workflow": f.Workflow,
		"key": f.Key, "tag": f.Tag, "q": f.Q, "after": f.After} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, t := range map[string]time.Time{"from": f.From, "to": f.To} {
		if !t.IsZero() {
			q.Set(k, t.Format(time.RFC3339Nano))
		}
	}
	if f.Desc {
		q.Set("order", "desc")
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	path := "/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out JobPage
	err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// AllJobs iterates over every job that f selects, page after page from
// f.After on; it stops at the first error, which it yields.
func (c *Client) AllJobs(ctx context.Context, f JobFilter) iter.Seq2[Job, error] {
	return func(yield func(Job, error) bool) {
		for {
			page, err := c.Jobs(ctx, f)
			if err != nil {
				yield(Job{}, err)
				return
			}
			for _, j := range page.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			f.After = page.Next
		}
	}
}

// Delete deletes a job: a finished one, or a waiting one after cancelling
// it. A running job is an error with status 409.
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/jobs/"+esc(id), nil, nil)
}

// Act applies one bulk action (ActionRetry, ActionCancel, ActionRun,
// ActionDelete) to the jobs of ids.
func (c *Client) Act(ctx context.Context, action string, ids []string) (ActionAnswer, error) {
	var out ActionAnswer
	err := c.call(ctx, http.MethodPost, "/v1/jobs/actions", ActionRequest{Action: action, IDs: ids}, &out)
	return out, err
}

// ActOnAll applies a bulk action to every job f selects, batch by batch
// (f.Limit jobs each, server default 500), calling progress after each
// batch with the running totals. It returns the totals and stops at the
// first error.
func (c *Client) ActOnAll(ctx context.Context, action string, f JobFilter, progress func(ActionAnswer)) (ActionAnswer, error) {
	total := ActionAnswer{Errors: []ActionError{}}
	q := f.Query()
	for after := f.After; ; {
		var ans ActionAnswer
		req := ActionRequest{Action: action, Filter: &q, After: after, Limit: f.Limit}
		if err := c.call(ctx, http.MethodPost, "/v1/jobs/actions", req, &ans); err != nil {
			return total, err
		}
		total.Matched += ans.Matched
		total.Changed += ans.Changed
		total.Errors = append(total.Errors, ans.Errors...)
		if progress != nil {
			progress(total)
		}
		if after = ans.Next; after == "" {
			return total, nil
		}
	}
}

// Cancel cancels a job that has not finished and returns it; a running
// job is told to stop at its agent's next renewal.
func (c *Client) Cancel(ctx context.Context, id string) (Job, error) {
	var out Job
	err := c.call(ctx, http.MethodPost, "/v1/jobs/"+esc(id)+"/cancel", nil, &out)
	return out, err
}

// Retry queues a failed or cancelled job again with fresh attempts and
// returns it.
func (c *Client) Retry(ctx context.Context, id string) (Job, error) {
	var out Job
	err := c.call(ctx, http.MethodPost, "/v1/jobs/"+esc(id)+"/retry", nil, &out)
	return out, err
}

// RunNow makes a scheduled job, or one waiting out a retry's backoff,
// ready now and returns it. Any other job is an error with status 409.
func (c *Client) RunNow(ctx context.Context, id string) (Job, error) {
	var out Job
	err := c.call(ctx, http.MethodPost, "/v1/jobs/"+esc(id)+"/run", nil, &out)
	return out, err
}

// Stats returns the server's usage report.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.call(ctx, http.MethodGet, "/v1/stats", nil, &out)
	return out, err
}

// Started confirms that an agent started an attempt of a job from a
// strict-start queue (LeasedJob.ConfirmStart), which lets the queue's next
// job be handed out; Worker sends it just before running the handler.
func (c *Client) Started(ctx context.Context, agent, id string, attempt int) (StartedAnswer, error) {
	var out StartedAnswer
	err := c.call(ctx, http.MethodPost, "/v1/agent/started", jobtype.StartedRequest{Agent: agent, ID: id, Attempt: attempt}, &out)
	return out, err
}

// Lease asks for work for an agent (agent role); with no work it waits up
// to r.WaitMs and answers with no jobs.
func (c *Client) Lease(ctx context.Context, r LeaseRequest) (LeaseAnswer, error) {
	var out LeaseAnswer
	err := c.call(ctx, http.MethodPost, "/v1/agent/lease", r, &out)
	return out, err
}

// Renew renews an agent's lease and returns the jobs it must stop and the
// new time limits of others; a lease that lapsed already is a 404.
func (c *Client) Renew(ctx context.Context, agent string) (RenewAnswer, error) {
	var out RenewAnswer
	err := c.call(ctx, http.MethodPost, "/v1/agent/renew", jobtype.AgentRequest{Agent: agent}, &out)
	return out, err
}

// Complete reports the results of an agent's jobs in one call and returns
// one acknowledgement per result.
func (c *Client) Complete(ctx context.Context, agent string, results ...Result) ([]Ack, error) {
	in := jobtype.CompleteRequest{Agent: agent, Results: results}
	var out jobtype.CompleteAnswer
	err := c.call(ctx, http.MethodPost, "/v1/agent/complete", in, &out)
	return out.Acks, err
}

// Progress reports how far a running attempt got (agent role); the
// answer says Ignored when the attempt no longer runs on that agent.
func (c *Client) Progress(ctx context.Context, r ProgressRequest) (ProgressAnswer, error) {
	var out ProgressAnswer
	err := c.call(ctx, http.MethodPost, "/v1/agent/progress", r, &out)
	return out, err
}

// Leave ends an agent's lease; its running jobs are released as if the
// lease lapsed.
func (c *Client) Leave(ctx context.Context, agent string) error {
	return c.call(ctx, http.MethodPost, "/v1/agent/leave", jobtype.AgentRequest{Agent: agent}, nil)
}

// CreateToken creates a token with a role (admin); its secret is in the
// answer only.
func (c *Client) CreateToken(ctx context.Context, name, role string) (NewToken, error) {
	in := struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}{name, role}
	var out NewToken
	err := c.call(ctx, http.MethodPost, "/v1/tokens", in, &out)
	return out, err
}

// Tokens lists the tokens (admin), without their secrets.
func (c *Client) Tokens(ctx context.Context) ([]Token, error) {
	var out struct {
		Tokens []Token `json:"tokens"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/tokens", nil, &out)
	return out.Tokens, err
}

// DeleteToken deletes a token (admin); a token cannot delete itself (409).
func (c *Client) DeleteToken(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/tokens/"+esc(id), nil, nil)
}
