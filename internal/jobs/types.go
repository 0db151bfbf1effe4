package jobs

import (
	"encoding/json"
	"time"
)

// State is where a job is, as users see it.
type State string

// Job states. The first four are unfinished; the last three are final.
const (
	StateWaiting   State = "waiting"   // for its dependencies
	StateDelayed   State = "delayed"   // waiting to retry
	StateQueued    State = "queued"    // ready, or held back by a key, group or tier
	StateRunning   State = "running"   // leased to an agent
	StateSucceeded State = "succeeded" // final
	StateFailed    State = "failed"    // final: past its retries
	StateCancelled State = "cancelled" // final
)

// Final says whether the state is one a job never leaves by itself.
func (s State) Final() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled
}

// Queue is a queue's configuration, as the API shows it.
type Queue struct {
	Name     string   `json:"name"`
	Priority int      `json:"priority"`
	Requires []string `json:"requires"`
	// Order is "fifo", "strict" or "random".
	Order  string `json:"order"`
	Batch  int    `json:"batch"`
	Active bool   `json:"active"`
	Retry  Retry  `json:"retry"`
}

// QueuePatch changes some fields of a queue; nil fields stay.
type QueuePatch struct {
	Priority *int      `json:"priority"`
	Requires *[]string `json:"requires"`
	Order    *string   `json:"order"`
	Batch    *int      `json:"batch"`
	Active   *bool     `json:"active"`
	Retry    *Retry    `json:"retry"`
}

// Retry is a retry policy: at most MaxAttempts runs (0 and 1 mean one),
// the wait before attempt n+1 being BackoffMs·2^(n-1), at most MaxBackoffMs.
type Retry struct {
	MaxAttempts  int   `json:"maxAttempts"`
	BackoffMs    int64 `json:"backoffMs"`
	MaxBackoffMs int64 `json:"maxBackoffMs"`
}

// KeyLimit limits how many running jobs hold a key, or every key with a
// prefix when Pattern ends in '*'.
type KeyLimit struct {
	Pattern string `json:"pattern"`
	Limit   int    `json:"limit"`
}

// JobSpec is a job as submitted.
type JobSpec struct {
	Queue   string          `json:"queue"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Tier names a duration tier, or "default" for an elastic job.
	Tier string `json:"tier,omitempty"`
	// TimeoutMs is the job's time limit; alone it picks the fastest tier
	// that fits it.
	TimeoutMs       int64    `json:"timeoutMs,omitempty"`
	Priority        int      `json:"priority,omitempty"`
	Keys            []string `json:"keys,omitempty"`
	Group           string   `json:"group,omitempty"`
	Mode            string   `json:"mode,omitempty"`
	After           []string `json:"after,omitempty"`
	RunAfterFailure bool     `json:"runAfterFailure,omitempty"`
	Retry           *Retry   `json:"retry,omitempty"`
}

// Job is a job as the API returns it.
type Job struct {
	ID string `json:"id"`
	JobSpec
	Workflow    string     `json:"workflow,omitempty"`
	State       State      `json:"state"`
	Attempt     int        `json:"attempt"`
	MaxAttempts int        `json:"maxAttempts"`
	Agent       string     `json:"agent,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
	ExitCode    *int       `json:"exitCode,omitempty"`
	Output      string     `json:"output,omitempty"`
	Error       string     `json:"error,omitempty"`
}

// WorkflowSpec is a workflow as submitted: jobs named within it and the
// dependencies between them (docs/design.md, "Workflows").
type WorkflowSpec struct {
	Name  string         `json:"name"`
	Jobs  []WorkflowJob  `json:"jobs"`
	Edges []WorkflowEdge `json:"edges"`
}

// WorkflowJob is a job of a workflow; its After names jobs of the workflow.
type WorkflowJob struct {
	Name string `json:"name"`
	JobSpec
}

// WorkflowEdge says that job To (a name) runs after job From succeeded.
type WorkflowEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Workflow is a workflow as the API returns it.
type Workflow struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// State is "running" until every job finished, then "succeeded" if all
	// did, else "failed".
	State string `json:"state"`
	Jobs  []Job  `json:"jobs"`
}

// LeaseRequest is an agent asking for work.
type LeaseRequest struct {
	Agent        string   `json:"agent"`
	Capabilities []string `json:"capabilities"`
	// Queues, when given, are the only queues the agent takes work from.
	Queues []string `json:"queues"`
	Slots  int      `json:"slots"`
	Max    int      `json:"max"`
	WaitMs int64    `json:"waitMs"`
	// Holding, when given, lists every job the agent holds (leased and not
	// yet reported); jobs the server leased to it that are missing never
	// reached it and are queued again.
	Holding *[]JobAttempt `json:"holding"`
}

// LeasedJob is a job handed to an agent.
type LeasedJob struct {
	ID        string          `json:"id"`
	Queue     string          `json:"queue"`
	Attempt   int             `json:"attempt"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// LeaseAnswer is the work an agent gets.
type LeaseAnswer struct {
	Jobs    []LeasedJob `json:"jobs"`
	LeaseMs int64       `json:"leaseMs"`
}

// JobAttempt names one attempt of a job.
type JobAttempt struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
}

// NewTimeout is a shorter time limit for a running elastic job, counted
// from its start.
type NewTimeout struct {
	ID        string `json:"id"`
	Attempt   int    `json:"attempt"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// RenewAnswer tells an agent what to do with its running jobs.
type RenewAnswer struct {
	LeaseMs  int64        `json:"leaseMs"`
	Stop     []JobAttempt `json:"stop"`
	Timeouts []NewTimeout `json:"timeouts"`
}

// Result is how an attempt ended, as an agent reports it.
type Result struct {
	ID       string `json:"id"`
	Attempt  int    `json:"attempt"`
	ExitCode int    `json:"exitCode"`
	Output   string `json:"output"`
	Error    string `json:"error"`
}

// Succeeded says whether the attempt succeeded: exit code 0 and no error.
func (r Result) Succeeded() bool { return r.ExitCode == 0 && r.Error == "" }

// Ack answers one Result.
type Ack struct {
	ID       string `json:"id"`
	Ignored  bool   `json:"ignored"`
	Retrying bool   `json:"retrying"`
}

// Filter selects jobs to list.
type Filter struct {
	Queue    string
	State    State
	Workflow string
	After    int64 // ids above this one
	Limit    int
}
