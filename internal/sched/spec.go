package sched

import (
	"errors"
	"time"
)

// Mode is a job's access mode for the read/write rule
// (docs/design.md, "Exclusive read/write groups and strict order"): running
// jobs that have a mode are all reads or all writes.
type Mode uint8

// Access modes.
const (
	ModeNone Mode = iota
	ModeRead
	ModeWrite
)

// String returns "none", "read" or "write".
func (m Mode) String() string {
	switch m {
	case ModeRead:
		return "read"
	case ModeWrite:
		return "write"
	}
	return "none"
}

// Order is how a queue picks its next job.
type Order uint8

// Queue orders.
const (
	// OrderFIFO starts the first admissible job in arrival order, skipping
	// blocked ones, as the queue cycle does
	// (docs/design.md, "Duration tiers and preemption").
	OrderFIFO Order = iota
	// OrderStrict starts only the head; nothing overtakes a blocked head
	// (docs/design.md, "Exclusive read/write groups and strict order").
	OrderStrict
	// OrderRandom starts a random admissible job among ready keys
	// (docs/design.md, "Per-key limits, priorities and random picks").
	OrderRandom
)

// String returns "fifo", "strict" or "random".
func (o Order) String() string {
	switch o {
	case OrderStrict:
		return "strict"
	case OrderRandom:
		return "random"
	}
	return "fifo"
}

// RetryPolicy says how often a failed job runs again and how long it waits
// first. A job runs at most MaxAttempts times (0 and 1 both mean once). The
// wait before attempt n+1 grows by Policy from Backoff (exponential:
// Backoff·2^(n-1)), at most MaxBackoff when set. With Jitter the wait is
// drawn uniformly from [0, that] (full jitter) with Config.Rand.
type RetryPolicy struct {
	MaxAttempts int
	Backoff     time.Duration
	MaxBackoff  time.Duration
	Policy      BackoffPolicy
	Jitter      bool
}

// QueueSpec defines a queue.
type QueueSpec struct {
	Name string
	// Priority orders queues: a worker gets work from the highest-priority
	// queue it can serve that has ready work; ties are broken at random.
	Priority int
	// Requires lists the capabilities a worker must offer to be served.
	Requires []string
	Order    Order
	// Batch caps the jobs one Pull takes from this queue (0: no cap).
	Batch int
	// Paused stops the queue from starting jobs; it still accepts them.
	Paused bool
	// Retry is the policy of jobs that do not set their own.
	Retry RetryPolicy
	// StrictStart, for a strict queue, hands out the next job only once the
	// worker holding the previous one confirmed that it started (Confirm),
	// or that job's attempt ended.
	StrictStart bool
}

// JobSpec describes a job to submit.
type JobSpec struct {
	ID    string
	Queue string
	// Tier is the job's duration tier (0 = fastest). Ignored when Default.
	Tier int
	// Default marks a "default" task
	// (docs/design.md, "Duration tiers and preemption"): no fixed duration,
	// queued as a fast task, started in the largest tier the limits allow and
	// downgraded when others need the room.
	Default bool
	// Priority orders jobs inside a queue (higher first; FIFO among equals).
	// Strict queues ignore it: they start jobs in request order.
	// Range: -32768..32767.
	Priority int
	// Keys are limit keys
	// (docs/design.md, "Per-key limits, priorities and random picks"): the job
	// starts only while every key has fewer running holders than its limit.
	Keys []string
	// Group makes the job exclusive within the group
	// (docs/design.md, "Exclusive read/write groups and strict order"): at most
	// one running job per group, across all queues.
	Group string
	Mode  Mode
	// After lists jobs that must succeed before this one starts
	// (docs/design.md, "Workflows").
	After []string
	// RunAfterFailure lets the job run once its dependencies have finished,
	// even when one of them failed or was cancelled.
	RunAfterFailure bool
	// Retry overrides the queue's retry policy when non-nil.
	Retry *RetryPolicy
	// NotBefore is when the job becomes ready: until then it is delayed (a
	// scheduled job, or, for a driver that rebuilds its state after a
	// restart, a retry waiting out its backoff). A job with unfinished
	// dependencies waits for it once they are done
	// (docs/design.md, "Scheduled jobs and deadlines").
	NotBefore time.Time
	// Deadline, when set, is when the job is cancelled (EventExpired) if it
	// has not started by then. Once its first attempt starts it no longer
	// applies.
	Deadline time.Time
	// Backoff, when non-nil, overrides the backoff fields (Backoff,
	// MaxBackoff, Policy, Jitter) of the job's policy, its own or its
	// queue's; its MaxAttempts is ignored.
	Backoff *RetryPolicy
	// Timeout is the job's own time limit when shorter than its tier's
	// duration (0: its tier's); enforced only with Config.Grace.
	Timeout time.Duration
	// Attempts is how many attempts the job already had, for a driver that
	// rebuilds its state after a restart: the next one is Attempts+1, and
	// they count toward the retry policy's MaxAttempts.
	Attempts int
}

// Edge says that job To depends on job From.
type Edge struct {
	From, To string
}

// WorkerSpec reports a worker (an Asymptote backend or an agent).
type WorkerSpec struct {
	ID           string
	Capabilities []string
	// Queues, when not empty, names the only queues the worker is served
	// from (an agent names the queues it serves); the queues'
	// requirements still apply.
	Queues []string
	// Slots is how many jobs the worker runs at once (at least 1).
	Slots int
	// Push workers get jobs from Dispatch; others ask with Pull.
	Push bool
	// LeaseTTL is how long the worker's lease lasts after each renewal;
	// zero means the lease never lapses (the driver watches the worker).
	LeaseTTL time.Duration
}

// Errors the core returns, wrapped with the offending name.
var (
	ErrUnknownQueue      = errors.New("unknown queue")
	ErrUnknownJob        = errors.New("unknown job")
	ErrUnknownWorker     = errors.New("unknown worker")
	ErrUnknownDependency = errors.New("unknown dependency")
	ErrDuplicateJob      = errors.New("duplicate job id")
	ErrInvalidJob        = errors.New("invalid job")
	ErrInvalidQueue      = errors.New("invalid queue")
	ErrInvalidWorker     = errors.New("invalid worker")
	ErrInvalidBatch      = errors.New("invalid batch size")
	ErrQueueBusy         = errors.New("queue has running jobs")
	ErrCycle             = errors.New("dependency cycle")
	// ErrDenied refuses an interactive task because no slot is free or its
	// queue is paused.
	ErrDenied = errors.New("no free slot")
)

// CycleError reports a workflow whose dependencies form a cycle; Job is on it.
type CycleError struct {
	Job   string
	Cycle []string
}

func (e *CycleError) Error() string {
	return "dependency cycle through job " + quote(e.Job)
}

// Unwrap makes errors.Is(err, ErrCycle) hold.
func (e *CycleError) Unwrap() error { return ErrCycle }

func quote(s string) string { return "\"" + s + "\"" }
