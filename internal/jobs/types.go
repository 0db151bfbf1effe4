package jobs

import "github.com/usherhq/usher/jobtype"

// The engine's view of the /v1 wire types: one definition, in package
// jobtype, shared with the Go client. The aliases keep the engine's names.
type (
	// State is where a job is, as users see it.
	State = jobtype.State
	// Queue is a queue's configuration, as the API shows it and the
	// stores keep it.
	Queue = jobtype.Queue
	// QueuePatch changes some fields of a queue; nil fields stay.
	QueuePatch = jobtype.QueueUpdate
	// Retry is a retry policy (jobtype.RetryPolicy).
	Retry = jobtype.RetryPolicy
	// KeyLimit limits how many running jobs hold a key, or every key with
	// a prefix when Pattern ends in '*'.
	KeyLimit = jobtype.KeyLimit
	// JobSpec is a job as submitted, and as the stores keep it.
	JobSpec = jobtype.JobSpec
	// Job is a job as the API returns it.
	Job = jobtype.Job
	// WorkflowSpec is a workflow as submitted (docs/design.md, "Workflows").
	WorkflowSpec = jobtype.WorkflowSpec
	// WorkflowJob is a job of a workflow; its After names jobs of the
	// workflow.
	WorkflowJob = jobtype.WorkflowJob
	// WorkflowEdge says that job To (a name) runs after job From succeeded.
	WorkflowEdge = jobtype.WorkflowEdge
	// Workflow is a workflow as the API returns it.
	Workflow = jobtype.Workflow
	// LeaseRequest is an agent asking for work.
	LeaseRequest = jobtype.LeaseRequest
	// LeasedJob is a job handed to an agent.
	LeasedJob = jobtype.LeasedJob
	// LeaseAnswer is the work an agent gets.
	LeaseAnswer = jobtype.LeaseAnswer
	// JobAttempt names one attempt of a job.
	JobAttempt = jobtype.JobRef
	// NewTimeout is a shorter time limit for a running elastic job,
	// counted from its start.
	NewTimeout = jobtype.JobTimeout
	// RenewAnswer tells an agent what to do with its running jobs.
	RenewAnswer = jobtype.RenewAnswer
	// Result is how an attempt ended, as an agent reports it.
	Result = jobtype.Result
	// Ack answers one Result.
	Ack = jobtype.Ack
)

// Job states. The first four are unfinished; the last three are final.
const (
	StateWaiting   = jobtype.StateWaiting
	StateDelayed   = jobtype.StateDelayed
	StateQueued    = jobtype.StateQueued
	StateRunning   = jobtype.StateRunning
	StateSucceeded = jobtype.StateSucceeded
	StateFailed    = jobtype.StateFailed
	StateCancelled = jobtype.StateCancelled
)

// Filter selects jobs to list. It is the engine's and the stores' query,
// not a wire body: the API reads it from the query string of GET /v1/jobs.
type Filter struct {
	Queue    string
	State    State
	Workflow string
	After    int64 // ids above this one
	Limit    int
}
