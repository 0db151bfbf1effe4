package asyqueue

import (
	"slices"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/sched"
)

// recentLimit is how many recent events the dashboard shows.
const recentLimit = 50

// DashboardEvent is a downgrade, halt or denial, for the dashboard.
type DashboardEvent struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // downgrade, halt, denial
	Task   string    `json:"task,omitempty"`
	Detail string    `json:"detail"`
}

// recentEvents keeps the last recentLimit events, oldest first.
type recentEvents struct{ list []DashboardEvent }

func (r *recentEvents) add(at time.Time, kind, task, detail string) {
	if len(r.list) == recentLimit {
		r.list = slices.Delete(r.list, 0, 1)
	}
	r.list = append(r.list, DashboardEvent{Time: at, Kind: kind, Task: task, Detail: detail})
}

// QueuedTask is a waiting task on the dashboard.
type QueuedTask struct {
	ID         string `json:"id"`
	Class      string `json:"class"`
	Position   int    `json:"position"`
	EstimateMS *int64 `json:"estimateMs"`
}

// RunningTask is a running task on the dashboard.
type RunningTask struct {
	ID          string    `json:"id"`
	Class       string    `json:"class"`
	Tier        string    `json:"tier,omitempty"`
	Backend     string    `json:"backend"`
	StartedAt   time.Time `json:"startedAt"`
	Interactive bool      `json:"interactive"`
}

// BackendState is a backend slot on the dashboard: idle, busy or down (a
// remote backend out of the pool).
type BackendState struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// TierState is one tier: running in it, counted toward its limit, limit.
type TierState struct {
	Name       string `json:"name"`
	DurationMS int64  `json:"durationMs"`
	Running    int    `json:"running"`
	Counted    int    `json:"counted"`
	Limit      int    `json:"limit"`
}

// DashboardState is what /api/dashboard streams.
type DashboardState struct {
	Time           time.Time          `json:"time"`
	Tiers          []TierState        `json:"tiers"`
	Queue          []QueuedTask       `json:"queue"`
	Running        []RunningTask      `json:"running"`
	Backends       []BackendState     `json:"backends"`
	Events         []DashboardEvent   `json:"events"` // newest first
	TasksPerSecond float64            `json:"tasksPerSecond"`
	Queues         []sched.QueueUsage `json:"queues"`
	Keys           []sched.KeyUsage   `json:"keys"`
}

// NoteDenial records a denial the session decided (bad request, idle) for
// the dashboard.
func (d *Dispatcher) NoteDenial(detail string) {
	_ = d.do(func() { d.recent.add(d.cfg.Now(), "denial", "", detail) })
}

// Dashboard returns the state the dashboard shows.
func (d *Dispatcher) Dashboard() (DashboardState, error) {
	var st DashboardState
	err := d.do(func() { st = d.dashboard() })
	return st, err
}

func (d *Dispatcher) dashboard() DashboardState {
	now := d.cfg.Now()
	snap := d.core.Snapshot()
	st := DashboardState{Time: now, Queues: snap.Queues, Keys: snap.Keys, Queue: []QueuedTask{}, Running: []RunningTask{}}
	for _, t := range snap.Tiers {
		st.Tiers = append(st.Tiers, TierState{Name: t.Name, DurationMS: t.Duration.Milliseconds(), Running: t.Running, Counted: t.Counted, Limit: t.Limit})
	}
	busy := map[string]bool{}
	for _, t := range d.tickets {
		if t.queued || t.backend == "" {
			continue
		}
		busy[t.backend] = true
		st.Running = append(st.Running, RunningTask{ID: t.id, Class: t.class, Tier: t.tier, Backend: t.backend, StartedAt: t.startedAt, Interactive: t.interactive})
	}
	slices.SortFunc(st.Running, func(a, b RunningTask) int { return a.StartedAt.Compare(b.StartedAt) })
	if estimates, err := d.core.Estimates(queueName, d.queued); err == nil {
		for _, e := range estimates {
			q := QueuedTask{ID: e.JobID, Position: e.Position}
			if t := d.tickets[e.JobID]; t != nil {
				q.Class = t.class
			}
			if e.Known {
				q.EstimateMS = millis(e.Wait)
			}
			st.Queue = append(st.Queue, q)
		}
	}
	for id := range d.backends {
		state := "idle"
		if busy[id] {
			state = "busy"
		}
		st.Backends = append(st.Backends, BackendState{ID: id, State: state})
	}
	for id := range d.down {
		st.Backends = append(st.Backends, BackendState{ID: id, State: "down"})
	}
	slices.SortFunc(st.Backends, func(a, b BackendState) int { return strings.Compare(a.ID, b.ID) })
	st.Events = slices.Clone(d.recent.list)
	slices.Reverse(st.Events)
	d.trimFinished(now)
	st.TasksPerSecond = float64(len(d.finished)) / time.Minute.Seconds()
	return st
}

// trimFinished forgets completions older than a minute.
func (d *Dispatcher) trimFinished(now time.Time) {
	i := 0
	for i < len(d.finished) && now.Sub(d.finished[i]) > time.Minute {
		i++
	}
	d.finished = slices.Delete(d.finished, 0, i)
}
