package jobsapi

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/usherhq/usher/internal/jobs"
	"github.com/usherhq/usher/internal/tokens"
	"github.com/usherhq/usher/jobtype"
)

func (a *api) createQueue(w http.ResponseWriter, r *http.Request) error {
	var spec jobtype.QueueSpec
	if err := decode(r, &spec); err != nil {
		return err
	}
	q, err := a.Engine.CreateQueue(r.Context(), queueOf(spec))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, q)
}

func (a *api) listQueues(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, jobtype.QueueList{Queues: a.Engine.Queues()})
}

// queueOf is the queue a spec creates: an absent active is true, an
// absent retry one attempt per job.
func queueOf(s jobtype.QueueSpec) jobtype.Queue {
	q := jobtype.Queue{Name: s.Name, Priority: s.Priority, Requires: s.Requires, Order: s.Order, Batch: s.Batch,
		Active: s.Active == nil || *s.Active, StrictStart: s.StrictStart}
	if s.Retry != nil {
		q.Retry = *s.Retry
	}
	return q
}

func (a *api) getQueue(w http.ResponseWriter, r *http.Request) error {
	q, err := a.Engine.Queue(r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, q)
}

func (a *api) updateQueue(w http.ResponseWriter, r *http.Request) error {
	var p jobtype.QueueUpdate
	if err := decode(r, &p); err != nil {
		return err
	}
	q, err := a.Engine.UpdateQueue(r.Context(), r.PathValue("name"), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, q)
}

func (a *api) deleteQueue(w http.ResponseWriter, r *http.Request) error {
	if err := a.Engine.DeleteQueue(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) flushQueue(w http.ResponseWriter, r *http.Request) error {
	n, err := a.Engine.FlushQueue(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, jobtype.FlushAnswer{Cancelled: n})
}

func (a *api) enqueueTargets(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if _, err := a.Engine.Queue(name); err != nil {
		return err
	}
	targets, err := jobs.ParseTargets(r.Body)
	if err != nil {
		return bodyError(err)
	}
	ids, err := a.Engine.EnqueueTargets(r.Context(), name, targets)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, jobtype.EnqueueAnswer{IDs: ids})
}

func (a *api) setLimit(w http.ResponseWriter, r *http.Request) error {
	var l jobtype.KeyLimit
	if err := decode(r, &l); err != nil {
		return err
	}
	l, err := a.Engine.SetKeyLimit(r.Context(), l)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}

func (a *api) listLimits(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, jobtype.KeyLimitList{Limits: a.Engine.KeyLimits()})
}

func (a *api) enqueue(w http.ResponseWriter, r *http.Request) error {
	var body jobtype.EnqueueRequest
	raw, err := decodeRaw(r, &body)
	if err != nil {
		return err
	}
	if err := emptyKeys(raw, body.Jobs); err != nil {
		return err
	}
	key, err := requestKey(r)
	if err != nil {
		return err
	}
	ctx, end := a.enqueueSpan(r, body.Jobs)
	ans, err := a.Engine.EnqueueKeyed(ctx, key, body.Jobs)
	end(ans.IDs, err)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, ans)
}

func (a *api) listJobs(w http.ResponseWriter, r *http.Request) error {
	f, err := listFilter(r.URL.Query())
	if err != nil {
		return err
	}
	page, err := a.Engine.JobPage(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, jobPage(page))
}

func jobPage(p jobs.Page) jobtype.JobPage {
	body := jobtype.JobPage{Jobs: p.Jobs}
	if p.Next != 0 {
		body.Next = strconv.FormatInt(p.Next, 10)
	}
	return body
}

func (a *api) deleteJob(w http.ResponseWriter, r *http.Request) error {
	if err := a.Engine.Delete(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) actOnJobs(w http.ResponseWriter, r *http.Request) error {
	var req jobtype.ActionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	ids, next, err := a.actionTargets(r, req)
	if err != nil {
		return err
	}
	changed, failed, err := a.Engine.Act(r.Context(), req.Action, ids)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, jobtype.ActionAnswer{Matched: len(ids), Changed: changed, Errors: failed, Next: next})
}

// actionTargets are the jobs a bulk action names, or one batch of those
// its filter selects and the cursor of the next batch.
func (a *api) actionTargets(r *http.Request, req jobtype.ActionRequest) ([]string, string, error) {
	if (req.Filter == nil) == (req.IDs == nil) {
		return nil, "", &jobs.FieldError{Field: "ids", Msg: "give either ids or a filter", Kind: jobs.ErrInvalid}
	}
	if req.Filter == nil {
		return req.IDs, "", nil
	}
	f, err := filterOf(*req.Filter, "filter.")
	if err != nil {
		return nil, "", err
	}
	f.Limit = cmp.Or(req.Limit, defaultActionBatch)
	if f.Limit < 1 || f.Limit > jobs.MaxActionBatch {
		return nil, "", &jobs.FieldError{Field: "limit", Msg: fmt.Sprintf("must be 1..%d", jobs.MaxActionBatch), Kind: jobs.ErrInvalid}
	}
	if f.After, err = cursor(req.After); err != nil {
		return nil, "", err
	}
	page, err := a.Engine.JobPage(r.Context(), f)
	if err != nil {
		return nil, "", err
	}
	ids := make([]string, len(page.Jobs))
	for i, j := range page.Jobs {
		ids[i] = j.ID
	}
	return ids, jobPage(page).Next, nil
}

// defaultActionBatch is how many jobs of a filter one bulk action
// request changes when it names no limit.
const defaultActionBatch = 500

// listFilter reads GET /v1/jobs's query string (docs/api.md, "Finding
// jobs").
func listFilter(q url.Values) (jobs.Filter, error) {
	jq := jobtype.JobQuery{Queue: q.Get("queue"), State: jobtype.State(q.Get("state")), Workflow: q.Get("workflow"),
		Key: q.Get("key"), Tag: q.Get("tag"), Q: q.Get("q")}
	var err error
	if jq.From, err = timeParam("from", q.Get("from")); err != nil {
		return jobs.Filter{}, err
	}
	if jq.To, err = timeParam("to", q.Get("to")); err != nil {
		return jobs.Filter{}, err
	}
	f, err := filterOf(jq, "")
	if err != nil {
		return jobs.Filter{}, err
	}
	switch q.Get("order") {
	case "", "asc":
	case "desc":
		f.Desc = true
	default:
		return jobs.Filter{}, &jobs.FieldError{Field: "order", Msg: "must be asc or desc", Kind: jobs.ErrInvalid}
	}
	f.Limit = 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return jobs.Filter{}, &jobs.FieldError{Field: "limit", Msg: "must be 1..1000", Kind: jobs.ErrInvalid}
		}
		f.Limit = n
	}
	f.After, err = cursor(q.Get("after"))
	return f, err
}

// timeParam reads an RFC 3339 time of the query string; nil when empty.
func timeParam(name, s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, &jobs.FieldError{Field: name, Msg: "must be an RFC 3339 time", Kind: jobs.ErrInvalid}
	}
	return &t, nil
}

// filterOf is the engine's filter of a job query; field prefixes the
// name of a field at fault.
func filterOf(q jobtype.JobQuery, field string) (jobs.Filter, error) {
	f := jobs.Filter{Queue: q.Queue, State: q.State, Workflow: q.Workflow, Key: q.Key, Tag: q.Tag, Query: q.Q}
	if q.From != nil {
		f.From = *q.From
	}
	if q.To != nil {
		f.To = *q.To
	}
	if len(f.Query) > 256 {
		return jobs.Filter{}, &jobs.FieldError{Field: field + "q", Msg: "at most 256 bytes", Kind: jobs.ErrInvalid}
	}
	return f, nil
}

// cursor reads a listing's cursor: empty, or a job id.
func cursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, &jobs.FieldError{Field: "after", Msg: "must be the next of a page (a job id)", Kind: jobs.ErrInvalid}
	}
	return n, nil
}

func (a *api) getJob(w http.ResponseWriter, r *http.Request) error {
	j, err := a.Engine.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, j)
}

func (a *api) cancelJob(w http.ResponseWriter, r *http.Request) error {
	j, err := a.Engine.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, j)
}

func (a *api) retryJob(w http.ResponseWriter, r *http.Request) error {
	j, err := a.Engine.Retry(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, j)
}

// runJobNow makes a scheduled or delayed job ready now.
func (a *api) runJobNow(w http.ResponseWriter, r *http.Request) error {
	j, err := a.Engine.RunNow(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, j)
}

func (a *api) submitWorkflow(w http.ResponseWriter, r *http.Request) error {
	var spec jobtype.WorkflowSpec
	raw, err := decodeRaw(r, &spec)
	if err != nil {
		return err
	}
	if err := keysInWorkflow(raw); err != nil {
		return err
	}
	id, byName, err := a.Engine.SubmitWorkflow(r.Context(), spec)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, jobtype.SubmittedWorkflow{ID: id, Jobs: byName})
}

// getWorkflow answers a workflow; with ?wait=DURATION (a Go duration such
// as 30s, cut to jobs.MaxWorkflowWait) it first waits for the workflow to
// finish, and answers it as it is when the wait ends first.
func (a *api) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	var wait time.Duration
	if s := r.URL.Query().Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return &jobs.FieldError{Field: "wait", Msg: fmt.Sprintf("%q is not a duration such as 30s", s), Kind: jobs.ErrInvalid}
		}
		wait = d
	}
	wf, err := a.Engine.WaitWorkflow(r.Context(), r.PathValue("id"), wait)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wf)
}

func (a *api) lease(w http.ResponseWriter, r *http.Request) error {
	var req jobtype.LeaseRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	ans, err := a.Engine.Lease(r.Context(), req)
	if err != nil {
		return err
	}
	a.leaseSpans(r, req.Agent, ans.Jobs)
	if err := writeJSON(w, http.StatusOK, ans); err != nil {
		a.Engine.Unlease(ans.Jobs) // the agent never got them
	}
	return nil
}

func (a *api) renew(w http.ResponseWriter, r *http.Request) error {
	var b jobtype.AgentRequest
	if err := decode(r, &b); err != nil {
		return err
	}
	ans, err := a.Engine.Renew(b.Agent)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ans)
}

func (a *api) started(w http.ResponseWriter, r *http.Request) error {
	var b jobtype.StartedRequest
	if err := decode(r, &b); err != nil {
		return err
	}
	ans, err := a.Engine.Started(r.Context(), b)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ans)
}

func (a *api) complete(w http.ResponseWriter, r *http.Request) error {
	var b jobtype.CompleteRequest
	if err := decode(r, &b); err != nil {
		return err
	}
	end := a.completeSpans(r, b.Agent, b.Results)
	acks, err := a.Engine.Complete(r.Context(), b.Agent, b.Results)
	end(acks, err)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, jobtype.CompleteAnswer{Acks: acks})
}

func (a *api) progress(w http.ResponseWriter, r *http.Request) error {
	var b jobtype.ProgressRequest
	if err := decode(r, &b); err != nil {
		return err
	}
	ans, err := a.Engine.Progress(r.Context(), b)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ans)
}

func (a *api) leave(w http.ResponseWriter, r *http.Request) error {
	var b jobtype.AgentRequest
	if err := decode(r, &b); err != nil {
		return err
	}
	if err := a.Engine.Leave(r.Context(), b.Agent); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) stats(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, a.Engine.Stats())
}

func (a *api) createToken(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Name string      `json:"name"`
		Role tokens.Role `json:"role"`
	}
	if err := decode(r, &b); err != nil {
		return err
	}
	if !b.Role.Valid() {
		return &jobs.FieldError{Field: "role", Msg: "must be admin, client or agent", Kind: jobs.ErrInvalid}
	}
	if b.Name == "" || len(b.Name) > 128 {
		return &jobs.FieldError{Field: "name", Msg: "1-128 characters", Kind: jobs.ErrInvalid}
	}
	t, secret, err := a.Tokens.Create(r.Context(), b.Name, b.Role)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, struct {
		tokens.Token
		Secret string `json:"token"`
	}{t, secret})
}

// whoami answers the caller's own token (without its secret), so that a
// page that logs in with a token learns its role.
func (a *api) whoami(w http.ResponseWriter, r *http.Request) error {
	tok, _ := r.Context().Value(tokenKey{}).(tokens.Token)
	return writeJSON(w, http.StatusOK, tok)
}

func (a *api) listTokens(w http.ResponseWriter, r *http.Request) error {
	list, err := a.Tokens.List(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"tokens": list})
}

func (a *api) deleteToken(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if self, _ := r.Context().Value(tokenKey{}).(tokens.Token); self.ID == id {
		return &jobs.FieldError{Msg: "a token cannot delete itself", Kind: jobs.ErrConflict}
	}
	if err := a.Tokens.Delete(r.Context(), id); err != nil {
		if err == tokens.ErrNotFound {
			return &jobs.FieldError{Msg: "no token " + id, Kind: jobs.ErrNotFound}
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
