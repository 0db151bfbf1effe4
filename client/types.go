package client

import (
	"encoding/json"
	"time"
)

// Roles of tokens (docs/api.md, Authentication).
const (
	RoleAdmin  = "admin"
	RoleClient = "client"
	RoleAgent  = "agent"
)

// States of a job.
const (
	StateWaiting   = "waiting"
	StateDelayed   = "delayed"
	StateQueued    = "queued"
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// RetryPolicy is how often a job is tried and how long it waits between
// tries (the wait doubles from BackoffMs up to MaxBackoffMs).
type RetryPolicy struct {
	MaxAttempts  int   `json:"maxAttempts,omitempty"`
	BackoffMs    int64 `json:"backoffMs,omitempty"`
	MaxBackoffMs int64 `json:"maxBackoffMs,omitempty"`
}

// Queue is a queue as the server returns it.
type Queue struct {
	Name     string       `json:"name"`
	Priority int          `json:"priority"`
	Requires []string     `json:"requires"`
	Order    string       `json:"order"`
	Batch    int          `json:"batch"`
	Active   bool         `json:"active"`
	Retry    *RetryPolicy `json:"retry,omitempty"`
}

// QueueSpec is a queue to create. Zero fields take the server's defaults:
// priority 0, no required capabilities, order fifo, no batch cap, active,
// one attempt per job. Set Active to new(false) to create a paused queue.
type QueueSpec struct {
	Name     string       `json:"name"`
	Priority int          `json:"priority,omitempty"`
	Requires []string     `json:"requires,omitempty"`
	Order    string       `json:"order,omitempty"`
	Batch    int          `json:"batch,omitempty"`
	Active   *bool        `json:"active,omitempty"`
	Retry    *RetryPolicy `json:"retry,omitempty"`
}

// QueueUpdate names the fields of a queue to change; nil fields stay as
// they are.
type QueueUpdate struct {
	Priority *int         `json:"priority,omitempty"`
	Requires *[]string    `json:"requires,omitempty"`
	Order    *string      `json:"order,omitempty"`
	Batch    *int         `json:"batch,omitempty"`
	Active   *bool        `json:"active,omitempty"`
	Retry    *RetryPolicy `json:"retry,omitempty"`
}

// KeyLimit caps the running jobs that hold a key; a Pattern ending in "*"
// sets the limit of every key with that prefix.
type KeyLimit struct {
	Pattern string `json:"pattern"`
	Limit   int    `json:"limit"`
}

// JobSpec is a job to submit. Only Queue is required; Payload is any JSON
// value (e.g. json.RawMessage(`"10.1.2.3"`)), handed to the agent as given.
type JobSpec struct {
	Queue           string          `json:"queue"`
	Payload         json.RawMessage `json:"payload,omitempty"`
	Tier            string          `json:"tier,omitempty"`
	TimeoutMs       int64           `json:"timeoutMs,omitempty"`
	Priority        int             `json:"priority,omitempty"`
	Keys            []string        `json:"keys,omitempty"`
	Group           string          `json:"group,omitempty"`
	Mode            string          `json:"mode,omitempty"`
	After           []string        `json:"after,omitempty"`
	RunAfterFailure bool            `json:"runAfterFailure,omitempty"`
	Retry           *RetryPolicy    `json:"retry,omitempty"`
}

// Job is a job as the server returns it. Times not reached yet are zero;
// ExitCode is nil until an attempt reported one.
type Job struct {
	ID              string          `json:"id"`
	Queue           string          `json:"queue"`
	State           string          `json:"state"`
	Payload         json.RawMessage `json:"payload,omitempty"`
	Tier            string          `json:"tier"`
	TimeoutMs       int64           `json:"timeoutMs"`
	Priority        int             `json:"priority"`
	Keys            []string        `json:"keys"`
	Group           string          `json:"group"`
	Mode            string          `json:"mode"`
	After           []string        `json:"after"`
	RunAfterFailure bool            `json:"runAfterFailure,omitempty"`
	Workflow        string          `json:"workflow"`
	Attempt         int             `json:"attempt"`
	MaxAttempts     int             `json:"maxAttempts"`
	Agent           string          `json:"agent"`
	CreatedAt       Time            `json:"createdAt"`
	StartedAt       Time            `json:"startedAt"`
	FinishedAt      Time            `json:"finishedAt"`
	ExitCode        *int            `json:"exitCode,omitempty"`
	Output          string          `json:"output"`
	Error           string          `json:"error"`
}

// Finished reports whether the job is in a final state.
func (j *Job) Finished() bool {
	return j.State == StateSucceeded || j.State == StateFailed || j.State == StateCancelled
}

// Time is an RFC 3339 time of an answer; JSON null or "" (a time not
// reached yet) decode as the zero time, and the zero time encodes as null.
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

// JobFilter selects jobs to list; empty fields select all. Limit is the
// page size (server default 100, at most 1000); After is the Next of the
// previous page.
type JobFilter struct {
	Queue    string
	State    string
	Workflow string
	Limit    int
	After    string
}

// JobPage is one page of a job listing; Next is empty on the last page.
type JobPage struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next,omitempty"`
}

// WorkflowJob is one job of a workflow, named within it; its After names
// other jobs of the workflow.
type WorkflowJob struct {
	Name string `json:"name"`
	JobSpec
}

// Edge is a dependency of a workflow: To runs after From succeeded.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// WorkflowSpec is a workflow to submit: named jobs and the edges between
// them (After and Edges may both be used).
type WorkflowSpec struct {
	Name  string        `json:"name,omitempty"`
	Jobs  []WorkflowJob `json:"jobs"`
	Edges []Edge        `json:"edges,omitempty"`
}

// SubmittedWorkflow is the answer to a submitted workflow: its id and the
// id of each job by name.
type SubmittedWorkflow struct {
	ID   string            `json:"id"`
	Jobs map[string]string `json:"jobs"`
}

// Workflow is a workflow as the server returns it; State is running until
// every job finished, then succeeded or failed.
type Workflow struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State string `json:"state"`
	Jobs  []Job  `json:"jobs"`
}

// LeaseRequest asks for work. Slots is how many jobs the agent runs at once;
// Max (default Slots) caps this answer; with no work the server waits up
// to WaitMs (at most 60000) before answering with no jobs.
type LeaseRequest struct {
	Agent        string   `json:"agent"`
	Capabilities []string `json:"capabilities,omitempty"`
	// Queues, when given, are the only queues the agent takes work from.
	Queues []string `json:"queues,omitempty"`
	// Holding, when not nil, lists every job the agent holds (leased and
	// not yet reported): the server queues again any job it leased to the
	// agent that is missing (the answer carrying it got lost). Worker
	// sends it.
	Holding *[]JobRef `json:"holding,omitempty"`
	Slots   int       `json:"slots"`
	Max     int       `json:"max,omitempty"`
	WaitMs  int       `json:"waitMs,omitempty"`
}

// LeaseAnswer is the work handed to an agent and how long its lease lasts
// without a call.
type LeaseAnswer struct {
	Jobs    []LeasedJob `json:"jobs"`
	LeaseMs int64       `json:"leaseMs"`
}

// LeasedJob is a job handed to an agent: run it within TimeoutMs and report
// it with its ID and Attempt.
type LeasedJob struct {
	ID        string          `json:"id"`
	Queue     string          `json:"queue"`
	Attempt   int             `json:"attempt"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// JobRef names one attempt of a job.
type JobRef struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
}

// JobTimeout is a new, shorter time limit of a running elastic job,
// counted from its start.
type JobTimeout struct {
	ID        string `json:"id"`
	Attempt   int    `json:"attempt"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// RenewAnswer is the answer to a lease renewal: the lease's length, the
// jobs the agent must end now and the new time limits of others.
type RenewAnswer struct {
	LeaseMs  int64        `json:"leaseMs"`
	Stop     []JobRef     `json:"stop"`
	Timeouts []JobTimeout `json:"timeouts"`
}

// Result is the outcome of one attempt of a job. Success is ExitCode 0 and
// no Error.
type Result struct {
	ID       string `json:"id"`
	Attempt  int    `json:"attempt"`
	ExitCode int    `json:"exitCode"`
	Output   string `json:"output,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Ack acknowledges one result: Ignored for a repeated, late or unknown
// completion; Retrying when a failed job will be tried again.
type Ack struct {
	ID       string `json:"id"`
	Ignored  bool   `json:"ignored"`
	Retrying bool   `json:"retrying"`
}

// Token is an API token as listed (its secret is shown only at creation).
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

// Stats is the server's usage report: per queue, key, group, tier and
// agent, and counters since the start.
type Stats struct {
	Queues   []QueueStats `json:"queues"`
	Keys     []KeyStats   `json:"keys"`
	Groups   []KeyStats   `json:"groups"`
	Tiers    []TierStats  `json:"tiers"`
	Agents   []AgentStats `json:"agents"`
	Counters Counters     `json:"counters"`
}

// QueueStats counts a queue's jobs: Queued are ready, Blocked those of them
// held back by a key, group or read/write gate (BlockedBy names the gate).
type QueueStats struct {
	Name      string         `json:"name"`
	Queued    int            `json:"queued"`
	Running   int            `json:"running"`
	Waiting   int            `json:"waiting"`
	Delayed   int            `json:"delayed"`
	Blocked   int            `json:"blocked"`
	BlockedBy map[string]int `json:"blockedBy,omitempty"`
}

// KeyStats is a key's (or group's) use against its limit.
type KeyStats struct {
	Key     string `json:"key"`
	Running int    `json:"running"`
	Limit   int    `json:"limit"`
	Queued  int    `json:"queued"`
}

// TierStats is a duration tier's use: Running jobs in it, Counted toward
// its limit (jobs of longer tiers count too).
type TierStats struct {
	Name       string `json:"name"`
	DurationMs int64  `json:"durationMs"`
	Running    int    `json:"running"`
	Counted    int    `json:"counted"`
	Limit      int    `json:"limit"`
}

// AgentStats is an agent's slots and running jobs.
type AgentStats struct {
	ID      string `json:"id"`
	Slots   int    `json:"slots"`
	Running int    `json:"running"`
}

// Counters are the server's event counts since its start.
type Counters struct {
	Started       int64 `json:"started"`
	Succeeded     int64 `json:"succeeded"`
	Failed        int64 `json:"failed"`
	Retried       int64 `json:"retried"`
	Cancelled     int64 `json:"cancelled"`
	Downgrades    int64 `json:"downgrades"`
	LeaseExpiries int64 `json:"leaseExpiries"`
}
