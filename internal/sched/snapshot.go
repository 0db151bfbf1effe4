package sched

import (
	"cmp"
	"slices"
	"time"
)

// Snapshot is the core's state for dashboards and tests.
type Snapshot struct {
	Queued, Waiting, Delayed, Running int
	Interactive                       int
	Tiers                             []TierUsage
	Queues                            []QueueUsage
	Keys                              []KeyUsage
	Groups                            []KeyUsage
	Reads, Writes                     int
	Workers                           []WorkerUsage
	Slots                             int
	Counters                          Counters
}

// TierUsage is one tier: jobs running in it, jobs counting toward its limit
// (it and slower tiers), and the limit.
type TierUsage struct {
	Name     string
	Duration time.Duration
	Running  int
	Counted  int
	Limit    int
}

// QueueUsage is one queue. Queued counts ready jobs; Blocked those of them
// whose key, group or mode gate is closed, and BlockedBy names the closed
// gates with the number of queued jobs each holds back.
type QueueUsage struct {
	Name                              string
	Priority                          int
	Order                             Order
	Paused                            bool
	Queued, Waiting, Delayed, Running int
	Blocked                           int
	BlockedBy                         map[string]int
}

// KeyUsage is a key's (or group's) running holders and limit (0: none).
// A key with a rate has Rated set, the Tokens its bucket holds now and,
// when it is not full, when the next token is due (NextToken). The rate
// fields stay out of JSON (the dashboard sends KeyUsage as it is; rates
// are a /v1 matter, whose stats carry them).
type KeyUsage struct {
	Key       string
	Running   int
	Limit     int
	Queued    int
	Rated     bool      `json:"-"`
	Tokens    int       `json:"-"`
	NextToken time.Time `json:"-"`
}

// WorkerUsage is a worker's load.
type WorkerUsage struct {
	ID      string
	Slots   int
	Running int
	Push    bool
}

// Snapshot returns the current state, sorted by name throughout.
func (s *Scheduler) Snapshot() Snapshot {
	snap := Snapshot{Interactive: len(s.interactive), Reads: int(s.reads.running), Writes: int(s.writes.running),
		Slots: s.totalSlots, Counters: s.stats}
	for k, t := range s.tiers {
		snap.Tiers = append(snap.Tiers, TierUsage{Name: t.Name, Duration: t.Duration,
			Running: s.running[k], Counted: s.count(k), Limit: s.limits[k]})
	}
	queued := s.queuedPerGate()
	for _, q := range s.byPrio {
		u := QueueUsage{Name: q.spec.Name, Priority: q.spec.Priority, Order: q.spec.Order, Paused: q.spec.Paused,
			Queued: q.queued, Waiting: q.waiting, Delayed: q.delayed, Running: q.running}
		s.blockedIn(q, &u)
		snap.Queues = append(snap.Queues, u)
		snap.Queued += q.queued
		snap.Waiting += q.waiting
		snap.Delayed += q.delayed
		snap.Running += q.running
	}
	snap.Keys = s.gateUsage(s.keyGates, queued, s.nowNS())
	snap.Groups = s.gateUsage(s.groups, queued, 0)
	for _, w := range s.workers {
		snap.Workers = append(snap.Workers, WorkerUsage{ID: w.id, Slots: w.slots, Running: len(w.jobs), Push: w.push})
	}
	slices.SortFunc(snap.Workers, func(a, b WorkerUsage) int { return cmp.Compare(a.ID, b.ID) })
	return snap
}

func (s *Scheduler) blockedIn(q *queue, u *QueueUsage) {
	for _, b := range q.buckets {
		if b.closed == 0 {
			continue
		}
		n := int(b.queued)
		if n == 0 {
			continue
		}
		u.Blocked += n
		if u.BlockedBy == nil {
			u.BlockedBy = map[string]int{}
		}
		for _, r := range b.gates {
			if r.g.closed || b.flags&parked != 0 && r.g.dry && slices.Contains(s.parked[r.g], b) {
				u.BlockedBy[r.g.label()] += n
			}
		}
	}
}

func (g *gate) label() string {
	switch g.kind {
	case gateGroup:
		return "group:" + g.name
	}
	return g.name
}

func (s *Scheduler) queuedPerGate() map[*gate]int {
	out := map[*gate]int{}
	for _, q := range s.queues {
		for _, b := range q.buckets {
			for _, r := range b.gates {
				out[r.g] += int(b.queued)
			}
		}
	}
	return out
}

func (s *Scheduler) gateUsage(gates map[string]*gate, queued map[*gate]int, now int64) []KeyUsage {
	out := make([]KeyUsage, 0, len(gates))
	for _, g := range gates {
		if g.live == 0 && g.running == 0 {
			continue
		}
		l := g.limit
		if l == unlimited {
			l = 0
		}
		u := KeyUsage{Key: g.name, Running: int(g.running), Limit: l, Queued: queued[g], Rated: g.rated}
		if g.rated {
			var next int64
			u.Tokens, next = s.gcs.rate(g.num).tokens(now)
			if next != 0 {
				u.NextToken = time.Unix(0, next)
			}
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b KeyUsage) int { return cmp.Compare(a.Key, b.Key) })
	return out
}
