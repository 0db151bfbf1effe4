package client

import (
	"time"

	"github.com/usherhq/usher/jobtype"
)

// Roles of tokens (docs/api.md, Authentication).
const (
	RoleAdmin  = "admin"
	RoleClient = "client"
	RoleAgent  = "agent"
)

// Backoff policies (jobtype.Backoff).
const (
	BackoffExponential = jobtype.BackoffExponential
	BackoffLinear      = jobtype.BackoffLinear
	BackoffConstant    = jobtype.BackoffConstant
)

// States of a job (jobtype.State).
const (
	StateWaiting   = jobtype.StateWaiting
	StateScheduled = jobtype.StateScheduled
	StateDelayed   = jobtype.StateDelayed
	StateQueued    = jobtype.StateQueued
	StateRunning   = jobtype.StateRunning
	StateSucceeded = jobtype.StateSucceeded
	StateFailed    = jobtype.StateFailed
	StateCancelled = jobtype.StateCancelled
)

// The request and answer bodies of /v1 are the types of package jobtype,
// which the server uses too; the aliases keep the client's names, so that
// a program using the client needs no second import.
type (
	// State is where a job is.
	State = jobtype.State
	// RetryPolicy is how often a job is tried and how long it waits
	// between tries.
	RetryPolicy = jobtype.RetryPolicy
	// Queue is a queue as the server returns it.
	Queue = jobtype.Queue
	// QueueSpec is a queue to create.
	QueueSpec = jobtype.QueueSpec
	// QueueUpdate names the fields of a queue to change.
	QueueUpdate = jobtype.QueueUpdate
	// KeyLimit caps the running jobs that hold a key or key pattern.
	KeyLimit = jobtype.KeyLimit
	// JobSpec is a job to submit.
	JobSpec = jobtype.JobSpec
	// UniqueOpts says which jobs count as the same unique job.
	UniqueOpts = jobtype.UniqueOpts
	// EnqueueAnswer is the ids of submitted jobs, and which existed.
	EnqueueAnswer = jobtype.EnqueueAnswer
	// Job is a job as the server returns it.
	Job = jobtype.Job
	// JobPage is one page of a job listing; Next is empty on the last page.
	JobPage = jobtype.JobPage
	// WorkflowSpec is a workflow to submit.
	WorkflowSpec = jobtype.WorkflowSpec
	// WorkflowJob is one job of a workflow, named within it.
	WorkflowJob = jobtype.WorkflowJob
	// Edge is a dependency of a workflow: To runs after From succeeded.
	Edge = jobtype.WorkflowEdge
	// SubmittedWorkflow is a submitted workflow's id and its jobs' ids.
	SubmittedWorkflow = jobtype.SubmittedWorkflow
	// Workflow is a workflow as the server returns it.
	Workflow = jobtype.Workflow
	// LeaseRequest asks for work.
	LeaseRequest = jobtype.LeaseRequest
	// LeaseAnswer is the work handed to an agent.
	LeaseAnswer = jobtype.LeaseAnswer
	// LeasedJob is a job handed to an agent.
	LeasedJob = jobtype.LeasedJob
	// StartedAnswer answers a confirmation that a job started.
	StartedAnswer = jobtype.StartedAnswer
	// JobRef names one attempt of a job.
	JobRef = jobtype.JobRef
	// JobTimeout is a new, shorter time limit of a running elastic job.
	JobTimeout = jobtype.JobTimeout
	// RenewAnswer is the answer to a lease renewal.
	RenewAnswer = jobtype.RenewAnswer
	// Result is the outcome of one attempt of a job.
	Result = jobtype.Result
	// Ack acknowledges one result.
	Ack = jobtype.Ack
	// Backoff is the wait between a job's tries.
	Backoff = jobtype.Backoff
	// Progress is how far a running job got.
	Progress = jobtype.Progress
	// ProgressRequest reports how far a running attempt got.
	ProgressRequest = jobtype.ProgressRequest
	// ProgressAnswer says whether a progress report was taken.
	ProgressAnswer = jobtype.ProgressAnswer
	// Stats is the server's usage report.
	Stats = jobtype.Stats
	// QueueStats counts a queue's jobs.
	QueueStats = jobtype.QueueStats
	// KeyStats is a key's (or group's) use against its limit.
	KeyStats = jobtype.KeyStats
	// TierStats is a duration tier's use.
	TierStats = jobtype.TierStats
	// AgentStats is an agent's slots and running jobs.
	AgentStats = jobtype.AgentStats
	// Counters are the server's event counts since its start.
	Counters = jobtype.Counters
	// JobQuery selects the jobs of a bulk action.
	JobQuery = jobtype.JobQuery
	// ActionRequest is one bulk action: on ids, or on a batch of a filter.
	ActionRequest = jobtype.ActionRequest
	// ActionAnswer says what a bulk action did.
	ActionAnswer = jobtype.ActionAnswer
	// ActionError is a job a bulk action did not change, and why.
	ActionError = jobtype.ActionError
)

// Bulk actions (Client.Act).
const (
	ActionRetry  = jobtype.ActionRetry
	ActionCancel = jobtype.ActionCancel
	ActionRun    = jobtype.ActionRun
	ActionDelete = jobtype.ActionDelete
)

// JobFilter selects jobs to list (docs/api.md, "Finding jobs"); empty
// fields select all. Key, Tag and Q find jobs by a key they hold, a tag
// they carry, or a text (an id, or a prefix of a tag); From and To bound
// the creation time. Desc lists the newest first. Limit is the page size
// (server default 100, at most 1000); After is the Next of the previous
// page. It is not a wire body but the query string of GET /v1/jobs, so it
// stays a client type.
type JobFilter struct {
	Queue    string
	State    State
	Workflow string
	Key      string
	Tag      string
	Q        string
	From, To time.Time
	Desc     bool
	Limit    int
	After    string
}

// Query is the filter's conditions, as a bulk action takes them.
func (f JobFilter) Query() JobQuery {
	q := JobQuery{Queue: f.Queue, State: f.State, Workflow: f.Workflow, Key: f.Key, Tag: f.Tag, Q: f.Q}
	if !f.From.IsZero() {
		q.From = &f.From
	}
	if !f.To.IsZero() {
		q.To = &f.To
	}
	return q
}

// Time is an RFC 3339 time of an answer; JSON null or "" decode as the
// zero time, and the zero time encodes as null. Jobs carry their times as
// the server sends them (time.Time, and *time.Time for times not reached
// yet); Time remains for token listings.
type Time struct{ time.Time }

// UnmarshalJSON decodes an RFC 3339 string, "" or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" || string(b) == `""` {
		t.Time = time.Time{}
		return nil
	}
	return t.Time.UnmarshalJSON(b)
}

// MarshalJSON encodes the zero time as null, any other as RFC 3339.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return t.Time.MarshalJSON()
}

// Token is an API token as listed (its secret is shown only at creation).
// Tokens are not jobs: they are not in package jobtype.
type Token struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	CreatedAt Time   `json:"createdAt"`
}

// NewToken is a created token with its secret, which is shown only here.
type NewToken struct {
	Token
	Secret string `json:"token"`
}
