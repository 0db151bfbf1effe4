// Package dashboard holds the value types of the dashboard that
// /api/dashboard streams: the Asymptote queue's state with the generic
// jobs'. Whoever builds it (the embedded dispatcher, the leading scheduler
// of multi-node mode) and whoever reads it (the queue servers, the web app's
// tests) share these types; the package sits at the bottom of the import
// graph and does no I/O.
package dashboard

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/usherhq/usher/internal/sched"
	"github.com/usherhq/usher/jobtype"
)

// Dashboard is what /api/dashboard streams: the Asymptote queue's state
// with the generic jobs'. The embedded default sends it without Leader and
// NoData; in multi-node mode the leading scheduler publishes it with
// Leader, and a queue server streams that, or a Dashboard with only NoData
// (and Leader when it knows who leads) when it has no document to show.
type Dashboard struct {
	State
	Jobs jobtype.Stats `json:"jobs"`
	// Leader is the scheduler whose state this is (multi-node mode).
	Leader *Leader `json:"leader,omitempty"`
	// NoData says why a queue server has no leader's state to show
	// (multi-node mode): no scheduler leads, the leader has not published
	// yet, or what it published cannot be read.
	NoData string `json:"noData,omitempty"`
	// History is the load over the last hour (History.Since: the whole
	// window in a stream's first snapshot, new samples in later ones). The
	// leader's document in Redis carries none: its samples are in
	// scheduler.dashboard.history.
	History *History `json:"history,omitempty"`
}

// Leader names the leading scheduler of multi-node mode.
type Leader struct {
	Node string `json:"node"`
	// Token is its lease token EPOCH:NODE.
	Token string `json:"token"`
}

// Encode writes d as JSON.
func (d Dashboard) Encode() ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	return b, nil
}

// Unavailable is the dashboard of a queue server that has no leader's
// state to show at now: empty tables, the leader when known, and why.
func Unavailable(now time.Time, leader *Leader, why string) Dashboard {
	return Dashboard{
		State: State{Time: now, Tiers: []Tier{}, Queue: []QueuedTask{}, Running: []RunningTask{},
			Backends: []Backend{}, Events: []Event{}},
		Leader: leader,
		NoData: why,
	}
}

// State is the Asymptote queue's state.
type State struct {
	Time           time.Time          `json:"time"`
	Tiers          []Tier             `json:"tiers"`
	Queue          []QueuedTask       `json:"queue"`
	Running        []RunningTask      `json:"running"`
	Backends       []Backend          `json:"backends"`
	Events         []Event            `json:"events"` // newest first
	TasksPerSecond float64            `json:"tasksPerSecond"`
	Queues         []sched.QueueUsage `json:"queues"`
	Keys           []sched.KeyUsage   `json:"keys"`
}

// Event is a downgrade, halt or denial.
type Event struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // downgrade, halt, denial
	Task   string    `json:"task,omitempty"`
	Detail string    `json:"detail"`
}

// QueuedTask is a waiting task.
type QueuedTask struct {
	ID         string `json:"id"`
	Class      string `json:"class"`
	Position   int    `json:"position"`
	EstimateMS *int64 `json:"estimateMs"`
}

// RunningTask is a running task.
type RunningTask struct {
	ID          string    `json:"id"`
	Class       string    `json:"class"`
	Tier        string    `json:"tier,omitempty"`
	Backend     string    `json:"backend"`
	StartedAt   time.Time `json:"startedAt"`
	Interactive bool      `json:"interactive"`
}

// Backend is a backend slot: idle, busy or down (a remote backend out of
// the pool).
type Backend struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// Tier is one duration tier: running in it, counted toward its limit,
// limit.
type Tier struct {
	Name       string `json:"name"`
	DurationMS int64  `json:"durationMs"`
	Running    int    `json:"running"`
	Counted    int    `json:"counted"`
	Limit      int    `json:"limit"`
}
