package asyqueue

import (
	"slices"
	"strings"
	"time"

	"github.com/usherhq/usher/internal/dashboard"
	"github.com/usherhq/usher/internal/sched"
)

// recentLimit is how many recent events the dashboard shows.
const recentLimit = 50

// RecentEvents keeps the last recentLimit events, oldest first. The zero
// value is ready to use; it is not safe for concurrent use.
type RecentEvents struct{ list []dashboard.Event }

// Add records an event, forgetting the oldest beyond recentLimit.
func (r *RecentEvents) Add(at time.Time, kind, task, detail string) {
	if len(r.list) == recentLimit {
		r.list = slices.Delete(r.list, 0, 1)
	}
	r.list = append(r.list, dashboard.Event{Time: at, Kind: kind, Task: task, Detail: detail})
}

// newestFirst returns the events, newest first.
func (r *RecentEvents) newestFirst() []dashboard.Event {
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

// NoteDenial records a denial the session decided (bad request, idle) for
// the dashboard.
func (d *Dispatcher) NoteDenial(detail string) {
	_ = d.do(func() { d.recent.Add(d.cfg.Now(), "denial", "", detail) })
}

// Dashboard returns the state the dashboard shows.
func (d *Dispatcher) Dashboard() (dashboard.State, error) {
	var st dashboard.State
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
	Running []dashboard.RunningTask
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
func BuildDashboard(p DashboardParts) dashboard.State {
	st := dashboard.State{Time: p.Now, Queues: p.Core.Queues, Keys: p.Core.Keys, Queue: []dashboard.QueuedTask{}, Running: []dashboard.RunningTask{}}
	for _, t := range p.Core.Tiers {
		st.Tiers = append(st.Tiers, dashboard.Tier{Name: t.Name, DurationMS: t.Duration.Milliseconds(), Running: t.Running, Counted: t.Counted, Limit: t.Limit})
	}
	for _, e := range p.Queue {
		q := dashboard.QueuedTask{ID: e.JobID, Position: e.Position}
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
	slices.SortFunc(st.Running, func(a, b dashboard.RunningTask) int {
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
		st.Backends = append(st.Backends, dashboard.Backend{ID: id, State: state})
	}
	for _, id := range p.Down {
		st.Backends = append(st.Backends, dashboard.Backend{ID: id, State: "down"})
	}
	slices.SortFunc(st.Backends, func(a, b dashboard.Backend) int { return strings.Compare(a.ID, b.ID) })
	if p.Events != nil {
		st.Events = p.Events.newestFirst()
	}
	if p.Ended != nil {
		st.TasksPerSecond = p.Ended.PerSecond(p.Now)
	}
	return st
}

func (d *Dispatcher) dashboard() dashboard.State {
	p := DashboardParts{Now: d.cfg.Now(), Core: d.core.Snapshot(), Events: &d.recent, Ended: &d.ended,
		Class: func(id string) string {
			if t := d.tickets[id]; t != nil {
				return t.class
			}
			return ""
		}}
	for _, t := range d.tickets {
		if !t.queued && t.backend != "" {
			p.Running = append(p.Running, dashboard.RunningTask{ID: t.id, Class: t.class, Tier: t.tier, Backend: t.backend, StartedAt: t.startedAt, Interactive: t.interactive})
		}
	}
	if estimates, err := d.core.Estimates(QueueName, d.queued); err == nil {
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
