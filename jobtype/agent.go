package jobtype

import "encoding/json"

// LeaseRequest asks for work (the body of POST /v1/agent/lease). Slots is
// how many jobs the agent runs at once; Max (default Slots) caps this
// answer; with no work the server waits up to WaitMs (at most 60000)
// before answering with no jobs.
type LeaseRequest struct {
	Agent        string   `json:"agent"`
	Capabilities []string `json:"capabilities,omitempty"`
	// Queues, when given, are the only queues the agent takes work from.
	Queues []string `json:"queues,omitempty"`
	// Holding, when not nil, lists every job the agent holds (leased and
	// not yet reported): the server queues again any job it leased to the
	// agent that is missing (the answer carrying it got lost).
	Holding *[]JobRef `json:"holding,omitempty"`
	Slots   int       `json:"slots"`
	Max     int       `json:"max,omitempty"`
	WaitMs  int64     `json:"waitMs,omitempty"`
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
	// ConfirmStart: the job comes from a strict-start queue, whose next job
	// waits until the agent confirms this one started (POST
	// /v1/agent/started, just before running it).
	ConfirmStart bool `json:"confirmStart,omitempty"`
	// Traceparent is the job's trace context (JobSpec.Traceparent): the
	// handler's span is its child.
	Traceparent string `json:"traceparent,omitempty"`
}

// StartedRequest is the body of POST /v1/agent/started: the agent
// confirms that it started an attempt.
type StartedRequest struct {
	Agent   string `json:"agent"`
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
}

// StartedAnswer answers POST /v1/agent/started: Ignored when the attempt
// is not one the agent holds (it ended, or its lease lapsed).
type StartedAnswer struct {
	Ignored bool `json:"ignored"`
}

// JobRef names one attempt of a job.
type JobRef struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
}

// AgentRequest is the body of POST /v1/agent/renew and /v1/agent/leave.
type AgentRequest struct {
	Agent string `json:"agent"`
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

// Result is the outcome of one attempt of a job, as an agent reports it.
// A positive SnoozeMs puts the job back to run again after that long,
// without counting the attempt; Cancel fails the job for good, with no
// retry. Value is a JSON result kept with the job.
type Result struct {
	ID       string          `json:"id"`
	Attempt  int             `json:"attempt"`
	ExitCode int             `json:"exitCode"`
	Output   string          `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	SnoozeMs int64           `json:"snoozeMs,omitempty"`
	Cancel   bool            `json:"cancel,omitempty"`
	Value    json.RawMessage `json:"result,omitempty"`
}

// Succeeded says whether the attempt succeeded: exit code 0 and no error,
// neither snoozed nor cancelled.
func (r Result) Succeeded() bool {
	return r.ExitCode == 0 && r.Error == "" && r.SnoozeMs == 0 && !r.Cancel
}

// Limits of what a handler reports, which the server enforces.
const (
	// MaxResult caps a job's JSON result, in bytes.
	MaxResult = 64 << 10
	// MaxProgressMessage caps a progress message, in bytes.
	MaxProgressMessage = 256
	// MaxSnoozeMs caps a snooze: one week.
	MaxSnoozeMs = 7 * 24 * 3600 * 1000
)

// ProgressRequest is the body of POST /v1/agent/progress: how far a
// running attempt got (Value from 0 to 1, Message short text).
type ProgressRequest struct {
	Agent   string  `json:"agent"`
	ID      string  `json:"id"`
	Attempt int     `json:"attempt"`
	Value   float64 `json:"value"`
	Message string  `json:"message,omitempty"`
}

// ProgressAnswer is the answer of POST /v1/agent/progress: Ignored when
// the attempt is not running (any more).
type ProgressAnswer struct {
	Ignored bool `json:"ignored"`
}

// CompleteRequest is the body of POST /v1/agent/complete: an agent's
// results, reported in one call.
type CompleteRequest struct {
	Agent   string   `json:"agent"`
	Results []Result `json:"results"`
}

// Ack acknowledges one result: Ignored for a repeated, late or unknown
// completion; Retrying when a failed job will be tried again; Snoozed when
// a snoozed job will run again.
type Ack struct {
	ID       string `json:"id"`
	Ignored  bool   `json:"ignored"`
	Retrying bool   `json:"retrying"`
	Snoozed  bool   `json:"snoozed,omitempty"`
}

// CompleteAnswer is the answer of POST /v1/agent/complete: one Ack per
// result, in order.
type CompleteAnswer struct {
	Acks []Ack `json:"acks"`
}
