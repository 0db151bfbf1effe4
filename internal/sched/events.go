package sched

import "time"

// Assignment hands a job to a worker. The driver reports its end with
// Complete(JobID, Attempt, ...).
type Assignment struct {
	JobID    string
	Queue    string
	WorkerID string
	// Attempt counts from 1; it fences late completions of older attempts.
	Attempt int
	// Tier is the tier the job runs in; Duration is that tier's duration, the
	// time limit the driver enforces (zero for interactive tasks).
	Tier     int
	Duration time.Duration
	// Default and Interactive repeat the job's class.
	Default     bool
	Interactive bool
}

// EventKind says what happened to a job or worker.
type EventKind uint8

// Event kinds. The driver acts on each; see Event.
const (
	// EventDowngraded: a running default task moved to a faster tier. The
	// driver shortens its time limit to Duration from its start; with
	// StopNow it already ran longer and must stop at once.
	EventDowngraded EventKind = iota + 1
	// EventHalted: an interactive task was halted to free its slot; the slot
	// is already free. The driver closes its backend connection.
	EventHalted
	// EventStopped: a running job was cancelled; the driver stops it. Its
	// slot is already free.
	EventStopped
	// EventRetrying: an attempt ended without success (failure or a lapsed
	// lease) and the job runs again at At.
	EventRetrying
	// EventFailed: the job failed past its retries.
	EventFailed
	// EventCancelled: the job was cancelled because a dependency failed or
	// was cancelled, or its queue was removed.
	EventCancelled
	// EventLeaseExpired: a worker's lease lapsed; its jobs were released
	// (each also gets EventRetrying or EventFailed) and the worker removed.
	EventLeaseExpired
	// EventExpired: the job had not started by its deadline and is
	// cancelled (At is when). Its dependants get EventCancelled unless
	// they run after failures.
	EventExpired
	// EventTimedOut: a running attempt ran past its time limit and grace
	// (only with Config.Grace); its slot is already free and the driver
	// stops it. EventRetrying or EventFailed, with TimedOut, follows.
	EventTimedOut
)

var eventNames = [...]string{"", "downgraded", "halted", "stopped", "retrying", "failed", "cancelled", "lease-expired", "expired", "timed-out"}

// String names the kind.
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is something the driver must learn of.
type Event struct {
	Kind     EventKind
	JobID    string
	WorkerID string
	// Attempt is the attempt the event concerns (downgrades, halts, stops).
	Attempt int
	// Tier and Duration: the new tier of a downgraded job.
	Tier     int
	Duration time.Duration
	StopNow  bool
	// At is when a retried job becomes ready again.
	At time.Time
	// TimedOut marks the EventRetrying or EventFailed of an attempt that
	// ran past its time limit.
	TimedOut bool
}

// Outcome is how an attempt ended.
type Outcome uint8

// Attempt outcomes.
const (
	Succeeded Outcome = iota + 1
	FailedAttempt
	// FailedFinal: the attempt failed and the job must not run again,
	// whatever its retry policy says (its handler cancelled it).
	FailedFinal
)

// Ack answers Complete.
type Ack struct {
	// Ignored is true when the job was unknown, not running, or running a
	// later attempt: a repeated or stale report, acknowledged and ignored.
	Ignored bool
	// Retrying is true when the job will run again, at RetryAt.
	Retrying bool
	RetryAt  time.Time
}
