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

// RecentEvents keeps the last recentLimit events, oldest first. The zero
// value is ready to use; it is not safe for concurrent use.
type RecentEvents struct{ list []DashboardEvent }

// Add records an event, forgetting the oldest beyond recentLimit.
func (r *RecentEvents) Add(at time.Time, kind, task, detail string) {
	if len(r.list) == recentLimit {
		r.list = slices.Delete(r.list, 0, 1)
	}
	r.list = append(r.list, DashboardEvent{Time: at, Kind: kind, Task: task, Detail: detail})
}

// newestFirst returns the events, newest first.
func (r *RecentEvents) newestFirst() []DashboardEvent {
	out := slices.Clone(r.list)
	slices.Reverse(out)
	return out
}

// Throughput counts the tasks that ended in the last minute. The zero
// value is ready to use; it is not safe for concurrent use.
type Throughput struct{ ended []time.Time }

// Add records a task that ended at now.
func (t *Throughput) Add(now time.Time) {
	t.ended = append(t.ended, now)
	t.trim(now)
}

// PerSecond is the tasks ended per second over the minute before now.
func (t *Throughput) PerSecond(now time.Time) float64 {
	t.trim(now)
	return float64(len(t.ended)) / time.Minute.Seconds()
}

// trim forgets endings older than a minute.
func (t *Throughput) trim(now time.Time) {
	i := 0
	for i < len(t.ended) && now.Sub(t.ended[i]) > time.Minute {
		i++
	}
	t.ended = slices.Delete(t.ended, 0, i)
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
	_ = d.do(func() { d.recent.Add(d.cfg.Now(), "denial", "", detail) })
}

// Dashboard returns the state the dashboard shows.
func (d *Dispatcher) Dashboard() (DashboardState, error) {
	var st DashboardState
	err := d.do(func() { st = d.dashboard() })
	return st, err
}

// DashboardParts is what a driver of the scheduling core knows besides the
// core's snapshot, for BuildDashboard: single-node mode's Dispatcher and
// multi-node mode's leading scheduler fill it from what each tracks.
type DashboardParts struct {
	Now  time.Time
	Core sched.Snapshot
	// Queue is the Asymptote queue in order, as sched's Estimates gives it;
	// Class names a queued task's class ("" when unknown).
	Queue []sched.Estimate
	Class func(id string) string
	// Running lists the running tasks, in any order.
	Running []RunningTask
	// Live names the backends in the pool; those a running task names are
	// busy, the others idle. Down names backends out of the pool.
	Live, Down []string
	Events     *RecentEvents
	Ended      *Throughput
}

// BuildDashboard assembles the dashboard's state: tiers from the core's
// snapshot, the queue with positions and estimates, running tasks by start
// time, backends by ID, events newest first, tasks per second over the
// last minute.
func BuildDashboard(p DashboardParts) DashboardState {
	st := DashboardState{Time: p.Now, Queues: p.Core.Queues, Keys: p.Core.Keys, Queue: []QueuedTask{}, Running: []RunningTask{}}
	for _, t := range p.Core.Tiers {
		st.Tiers = append(st.Tiers, TierState{Name: t.Name, DurationMS: t.Duration.Milliseconds(), Running: t.Running, Counted: t.Counted, Limit: t.Limit})
	}
	for _, e := range p.Queue {
		q := QueuedTask{ID: e.JobID, Position: e.Position}
		if p.Class != nil {
			q.Class = p.Class(e.JobID)
		}
		if e.Known {
			q.EstimateMS = millis(e.Wait)
		}
		st.Queue = append(st.Queue, q)
	}
	busy := map[string]bool{}
	for _, r := range p.Running {
		busy[r.Backend] = true
		st.Running = append(st.Running, r)
	}
	slices.SortFunc(st.Running, func(a, b RunningTask) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, id := range p.Live {
		state := "idle"
		if busy[id] {
			state = "busy"
		}
		st.Backends = append(st.Backends, BackendState{ID: id, State: state})
	}
	for _, id := range p.Down {
		st.Backends = append(st.Backends, BackendState{ID: id, State: "down"})
	}
	slices.SortFunc(st.Backends, func(a, b BackendState) int { return strings.Compare(a.ID, b.ID) })
	if p.Events != nil {
		st.Events = p.Events.newestFirst()
	}
	if p.Ended != nil {
		st.TasksPerSecond = p.Ended.PerSecond(p.Now)
	}
	return st
}

func (d *Dispatcher) dashboard() DashboardState {
	p := DashboardParts{Now: d.cfg.Now(), Core: d.core.Snapshot(), Events: &d.recent, Ended: &d.ended,
		Class: func(id string) string {
			if t := d.tickets[id]; t != nil {
				return t.class
			}
			return ""
		}}
	for _, t := range d.tickets {
		if !t.queued && t.backend != "" {
			p.Running = append(p.Running, RunningTask{ID: t.id, Class: t.class, Tier: t.tier, Backend: t.backend, StartedAt: t.startedAt, Interactive: t.interactive})
		}
	}
	if estimates, err := d.core.Estimates(queueName, d.queued); err == nil {
		p.Queue = estimates
	}
	for id := range d.backends {
		p.Live = append(p.Live, id)
	}
	for id := range d.down {
		p.Down = append(p.Down, id)
	}
	return BuildDashboard(p)
}
