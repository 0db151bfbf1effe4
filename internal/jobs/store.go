package jobs

import (
	"context"
	"time"

	"github.com/usherhq/usher/jobtype"
)

// Store keeps the engine's state durable. It works at the level of queue
// operations: the engine decides, in memory, and appends what changed;
// the store writes the changes in the order they were appended, many
// operations per transaction, and says when they are durable. At start the
// engine rebuilds its state from Load.
//
// internal/sqlitejobs implements it on SQLite; a Redis store (multi-node
// mode) implements the same interface.
type Store interface {
	// Load reads what the engine rebuilds from: queues, limits, unfinished
	// jobs in id order, and the next ids.
	Load(ctx context.Context) (*Snapshot, error)
	// Append queues changes to be written after every change appended
	// before. It never blocks on I/O; the caller waits on the result.
	Append(ops ...Op) Pending
	// Job reads one job; ErrNotFound when there is none.
	Job(ctx context.Context, id int64) (jobtype.Job, error)
	// Jobs lists one page of the jobs f selects, in id order (descending
	// with f.Desc): at most f.Limit jobs, found among at most
	// f.ScanLimit() examined, and the cursor to go on from (0: done).
	Jobs(ctx context.Context, f Filter) (Page, error)
	// WorkflowInfo reads a workflow's name; ErrNotFound when there is none.
	WorkflowInfo(ctx context.Context, id int64) (name string, err error)
	// Close writes what was appended and closes the store.
	Close() error
}

// Pending is appended changes on their way to disk.
type Pending interface {
	// Wait returns once the changes are durable, or the store failed.
	Wait(ctx context.Context) error
}

// Snapshot is what Load reads.
type Snapshot struct {
	Queues       []jobtype.Queue
	Limits       []jobtype.KeyLimit
	Jobs         []Record // unfinished, in id order
	NextJob      int64
	NextWorkflow int64
	Crons        []CronRecord // periodic jobs, sorted by name
	// Keys are the idempotency keys kept: an insert whose spec has one
	// keeps it (key, job id, creation time), and an OpKeepKey a request's
	// (key, its jobs, creation time), until an OpPruneKeys.
	Keys []IdemKey
}

// CronRecord is a periodic job's entry as stored: its definition, the
// last tick that made a job, and From, the time from which its ticks
// count (its creation, or its last resumption): the next tick is the
// first after both (docs/design.md, "Periodic jobs").
type CronRecord struct {
	Name     string          `json:"name"`
	Spec     string          `json:"spec"`
	Timezone string          `json:"timezone"`
	Job      jobtype.JobSpec `json:"job"` // the template; Queue set
	Paused   bool            `json:"paused"`
	LastAt   time.Time       `json:"lastAt"`
	From     time.Time       `json:"from"`
}

// Record is an unfinished job as stored.
type Record struct {
	ID       int64
	Spec     jobtype.JobSpec // resolved: Tier and TimeoutMs set, After empty
	Workflow int64
	// Attempt is the number of the last attempt started (0: none yet).
	Attempt int
	// Running is true when an attempt was running at the last write.
	Running bool
	// After lists the job's unfinished dependencies.
	After []int64
	// ReadyAt is when a job waiting out a retry's backoff may run again.
	ReadyAt   time.Time
	CreatedAt time.Time
}

// OpKind says what an Op changes.
type OpKind uint8

// Operation kinds.
const (
	OpPutQueue    OpKind = iota + 1 // Queue
	OpDeleteQueue                   // Name
	OpPutLimit                      // Limit (0 removes it)
	OpInsert                        // Record, with its dependencies in After
	OpWorkflow                      // ID, Name: a workflow's row
	OpStart                         // ID, Attempt, Agent, At
	OpRequeue                       // ID, At (when it may run), Result: an attempt ended, the job runs again
	OpFinish                        // ID, State, At, Result (may be nil)
	OpReset                         // ID, At, Record, Name (its workflow's): a finished job queued again with fresh attempts; written anew from Record if a prune deleted it
	OpPrune                         // At: finished jobs that finished before At are deleted
	OpPutCron                       // Cron: a periodic job's entry, created or changed
	OpDeleteCron                    // Name: a periodic job's entry is removed
	OpFireCron                      // Record, Cron: a tick's job inserted and its entry's LastAt, in one write
	OpPruneKeys                     // At: idempotency keys kept since before At are deleted
	OpSnooze                        // ID, Attempt (the attempts that count), At (when it may run): a running job snoozed
	OpProgress                      // ID, Progress: a running job's latest progress
	OpKeepKey                       // Key: an enqueue request's idempotency key, kept with its jobs' ids
	OpDelete                        // ID: a finished job is deleted, with its tags, keys and dependencies
)

// Op is one change to durable state.
type Op struct {
	Kind    OpKind
	ID      int64
	Attempt int
	Name    string
	Agent   string
	State   jobtype.State
	At      time.Time
	Queue   *jobtype.Queue
	Limit   *jobtype.KeyLimit
	Record  *Record
	Result  *jobtype.Result
	Cron    *CronRecord
	// Progress is the progress of OpProgress.
	Progress *jobtype.Progress
	// Key is the request key of OpKeepKey.
	Key *IdemKey
	// Ended is when the attempt that an OpRequeue with a Result ended (At
	// is when the job may run again), for the job's attempt history.
	Ended time.Time
}
