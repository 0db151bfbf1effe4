package jobtype

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

// StateScheduled is an unfinished state: the job waits for its due time
// (JobSpec.RunAt or DelayMs) before its first run.
const StateScheduled State = "scheduled"

// Final says whether the state is one a job never leaves by itself.
func (s State) Final() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled
}

// JobSpec is a job to submit. Only Queue is required; Payload is any JSON
// value (e.g. json.RawMessage(`"10.1.2.3"`)), handed to the agent as given.
// The server stores a job's spec in this form.
type JobSpec struct {
	Queue   string          `json:"queue"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Tier names a duration tier, or "default" for an elastic job.
	Tier string `json:"tier,omitempty"`
	// TimeoutMs is the job's time limit; alone it picks the fastest tier
	// that fits it.
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
	Priority  int      `json:"priority,omitempty"`
	Keys      []string `json:"keys,omitempty"`
	Group     string   `json:"group,omitempty"`
	// Mode is "read" or "write" within Group.
	Mode            string       `json:"mode,omitempty"`
	After           []string     `json:"after,omitempty"`
	RunAfterFailure bool         `json:"runAfterFailure,omitempty"`
	Retry           *RetryPolicy `json:"retry,omitempty"`
	// Backoff, when set, is the job's own wait between tries; it replaces
	// the backoff of its retry policy (its own or its queue's).
	Backoff *Backoff `json:"backoff,omitempty"`
	// RunAt schedules the job's first run (RFC 3339); DelayMs, the
	// alternative, schedules it that many milliseconds after submission
	// (the server stores it as RunAt). Until then the job is scheduled; a
	// job with dependencies waits for its due time once they are done.
	RunAt   *time.Time `json:"runAt,omitempty"`
	DelayMs int64      `json:"delayMs,omitempty"`
	// Deadline discards the job (state cancelled, error "deadline passed")
	// if it has not started by then (RFC 3339).
	Deadline *time.Time `json:"deadline,omitempty"`
	// IdempotencyKey makes a repeated enqueue harmless: while the key is
	// kept (24 h by default), a job submitted with the same key is not
	// created again; the answer gives the first job's id.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Unique keeps at most one job alike among the unfinished ones.
	Unique *UniqueOpts `json:"unique,omitempty"`
	// Tags are short labels to find the job by (GET /v1/jobs?tag=): at
	// most MaxTags, each 1 to MaxTagBytes bytes of printable text without
	// spaces; the server drops repeats and keeps the order.
	Tags []string `json:"tags,omitempty"`
	// Metadata is a small JSON object (at most MaxMetadataBytes) kept
	// with the job and shown with it; the server does not read it.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Traceparent is the W3C trace context of the caller that enqueued
	// the job (the Go client fills it in from its context): the handler's
	// span and the server's spans of the job join that trace. One that
	// does not parse is dropped, with a warning in the server's log.
	Traceparent string `json:"traceparent,omitempty"`
}

// Limits of a job's tags and metadata.
const (
	MaxTags          = 16
	MaxTagBytes      = 64
	MaxMetadataBytes = 4096
)

// UniqueOpts says which jobs count as the same one (docs/api.md,
// "Unique jobs"): those of the same queue, with the same payload when
// ByArgs, created in the same period of ByPeriodMs milliseconds when set,
// and in one of States (default: every unfinished state).
type UniqueOpts struct {
	ByArgs     bool    `json:"byArgs,omitempty"`
	ByPeriodMs int64   `json:"byPeriodMs,omitempty"`
	States     []State `json:"states,omitempty"`
}

// Job is a job as the server returns it: its spec (whose empty fields the
// server leaves out) and its progress. StartedAt and FinishedAt are nil
// (absent on the wire) until reached; ExitCode is nil until an attempt
// reported one.
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
	// Progress is the last progress its handler reported, if any.
	Progress *Progress `json:"progress,omitempty"`
	// Result is the JSON value its handler returned last, if any.
	Result json.RawMessage `json:"result,omitempty"`
	// Attempts are the job's earlier attempts that ended without success
	// (failed, timed out, lost with their agent), oldest first, the last
	// MaxAttemptHistory of them; the job's own fields tell its last
	// attempt. Only GET /v1/jobs/{id} fills them in.
	Attempts []Attempt `json:"attempts,omitempty"`
}

// Attempt is one ended attempt of a job, as its history keeps it.
type Attempt struct {
	Attempt   int        `json:"attempt"`
	Agent     string     `json:"agent,omitempty"`
	StartedAt *time.Time `json:"startedAt,omitempty"`
	EndedAt   time.Time  `json:"endedAt"`
	ExitCode  *int       `json:"exitCode,omitempty"`
	Error     string     `json:"error,omitempty"`
	// Output is the tail of its output, at most MaxAttemptOutput bytes.
	Output string `json:"output,omitempty"`
}

// Bounds of a job's attempt history.
const (
	MaxAttemptHistory = 20
	MaxAttemptOutput  = 2048
)

// Progress is how far a running job got, as its handler last reported it:
// Value is a fraction from 0 to 1; Message is short free text.
type Progress struct {
	Value   float64 `json:"value"`
	Message string  `json:"message,omitempty"`
}

// Finished reports whether the job is in a final state.
func (j Job) Finished() bool { return j.State.Final() }

// IdempotencyKeyHeader is the header of POST /v1/jobs that gives the
// request an idempotency key of its own: a repeat of the request while
// the key is kept creates nothing and answers the first request's ids.
const IdempotencyKeyHeader = "Idempotency-Key"

// EnqueueRequest is the body of POST /v1/jobs: jobs submitted all or none.
type EnqueueRequest struct {
	Jobs []JobSpec `json:"jobs"`
}

// EnqueueAnswer is the answer of POST /v1/jobs and of POST
// /v1/queues/{name}/targets: the new jobs' ids in the given order.
// Existing, parallel to IDs and absent when all false, marks the ids of
// jobs that were there before (an idempotency key or a unique job
// matched) rather than created by this request.
type EnqueueAnswer struct {
	IDs      []string `json:"ids"`
	Existing []bool   `json:"existing,omitempty"`
}

// JobPage is one page of a job listing (GET /v1/jobs); Next, the after
// of the following page, is absent on the last page.
type JobPage struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next,omitempty"`
}

// JobQuery selects jobs: the query string of GET /v1/jobs and the filter
// of a bulk action (docs/api.md, "Finding jobs"). Empty fields select
// all; every field is a value compared with the job's, never a pattern.
type JobQuery struct {
	Queue    string `json:"queue,omitempty"`
	State    State  `json:"state,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	// Key selects the jobs that hold this key.
	Key string `json:"key,omitempty"`
	// Tag selects the jobs that carry this tag.
	Tag string `json:"tag,omitempty"`
	// Q is a text search: the job whose id it is, and the jobs carrying
	// a tag that begins with it.
	Q string `json:"q,omitempty"`
	// From and To bound the creation time (from inclusive, to exclusive).
	From *time.Time `json:"from,omitempty"`
	To   *time.Time `json:"to,omitempty"`
}

// Bulk actions: what POST /v1/jobs/actions does to each job.
const (
	ActionRetry  = "retry"
	ActionCancel = "cancel"
	ActionRun    = "run"
	ActionDelete = "delete"
)

// ActionRequest is the body of POST /v1/jobs/actions: one action on the
// jobs named by IDs, or on one batch of those Filter selects, from the
// cursor After on, at most Limit of them.
type ActionRequest struct {
	Action string    `json:"action"` // retry, cancel, run or delete
	IDs    []string  `json:"ids,omitempty"`
	Filter *JobQuery `json:"filter,omitempty"`
	After  string    `json:"after,omitempty"`
	Limit  int       `json:"limit,omitempty"`
}

// ActionAnswer says what a bulk action did: the jobs it met, the jobs it
// changed, why the others were not, and the cursor of the next batch of
// a filter (absent once the filter is covered).
type ActionAnswer struct {
	Matched int           `json:"matched"`
	Changed int           `json:"changed"`
	Errors  []ActionError `json:"errors"`
	Next    string        `json:"next,omitempty"`
}

// ActionError is a job a bulk action did not change, and why.
type ActionError struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}
